//! PLACEHOLDER (not committed): replaced by the merge branch.
use crate::api::*;
#[derive(Debug)]
pub struct MergeError(pub String);
impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub struct CreateResult {
    rsp: CreateContainerResponse,
    owners: OwningPlugins,
}
impl CreateResult {
    pub fn new(_req: &mut CreateContainerRequest) -> Self {
        CreateResult {
            rsp: Default::default(),
            owners: Default::default(),
        }
    }
    pub fn apply(
        &mut self,
        _req: &mut CreateContainerRequest,
        _plugin: &str,
        rpl: CreateContainerResponse,
    ) -> Result<(), MergeError> {
        self.rsp = rpl;
        Ok(())
    }
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
    }
    pub fn response(&self) -> &CreateContainerResponse {
        &self.rsp
    }
    pub fn into_response(self) -> CreateContainerResponse {
        self.rsp
    }
}
pub struct UpdateResult {
    rsp: UpdateContainerResponse,
}
impl UpdateResult {
    pub fn new(_req: &mut UpdateContainerRequest) -> Self {
        UpdateResult {
            rsp: Default::default(),
        }
    }
    pub fn apply(
        &mut self,
        _req: &mut UpdateContainerRequest,
        _plugin: &str,
        rpl: UpdateContainerResponse,
    ) -> Result<(), MergeError> {
        self.rsp = rpl;
        Ok(())
    }
    pub fn into_response(self) -> UpdateContainerResponse {
        self.rsp
    }
}
pub struct StopResult {
    rsp: StopContainerResponse,
}
impl StopResult {
    pub fn new() -> Self {
        StopResult {
            rsp: Default::default(),
        }
    }
    pub fn apply(&mut self, _plugin: &str, rpl: StopContainerResponse) -> Result<(), MergeError> {
        self.rsp = rpl;
        Ok(())
    }
    pub fn into_response(self) -> StopContainerResponse {
        self.rsp
    }
}
