//! The stub's ttrpc server for the Plugin service, on mux connection 1.
//!
//! ttrpc-rust's server reads every message into a fresh zero-filled
//! buffer, decodes its envelope into a second copy of the payload, and
//! passes the request and its answer between tasks through channels. In a
//! plugin linked with glibc those large buffers cost far more than their
//! size: the first allocation of a kilobyte or more merges every small
//! chunk freed since the one before (the last request's hundreds of
//! strings) back into glibc's bins, so the strings of the request decoded
//! next are allocated on its slow path. Measured with callgrind in the
//! bench plugin, one typical CreateContainer cost ~256,000 instructions,
//! of which that one zero-filled buffer was ~25,000 (docs/PERFORMANCE.md).
//!
//! This server reads each message into one buffer it keeps, decodes the
//! request from it and runs the handler in a task of its own, which
//! encodes the answer behind its header in one buffer and writes it.
//! Requests are served concurrently, as ttrpc-rust's and Go's servers
//! serve them: a handler waiting for the runtime (an unsolicited update
//! sent from it, say) does not hold up the requests behind it.
//!
//! A runtime sees what ttrpc-rust's server made it see: a request's
//! timeout bounds its handler (`DeadlineExceeded`, "timeout"); a failed
//! handler's status goes as it is, another error as `Unknown`; an unknown
//! service is `InvalidArgument` and an unknown method `Unimplemented`; a
//! request or a reply over ttrpc's 4 MiB limit is answered with
//! `InvalidArgument` in ttrpc's words, which runtimes recognize; an even
//! stream is refused, and data for a stream (the NRI services have none)
//! is answered as for a stream that ended.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, error};
use nri_api::envelope::{
    discard, encode_response, oversized, read_envelope, Header, Request, MESSAGE_TYPE_DATA,
    MESSAGE_TYPE_REQUEST, PLUGIN_SERVICE,
};
use nri_api::mux::{Conn, TTRPC_HEADER_LEN, TTRPC_MESSAGE_LENGTH_MAX};
use protobuf::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::task::{JoinHandle, JoinSet};

use super::plugin::Plugin;
use super::service::Service;
use crate::api;

/// A message buffer grown past this is let go once the message is served,
/// so that one large Synchronize does not stay resident in an idle plugin.
const KEEP_CAPACITY: usize = 64 << 10;

/// The server of one connection. Dropping it stops it: the reading ends
/// and the handlers still running are cancelled, as ttrpc-rust's server
/// ends them when its connection goes.
pub(crate) struct Server {
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `service` on `conn`, on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn start<P: Plugin>(conn: Conn, service: Service<P>) -> Server {
        let (rd, wr) = tokio::io::split(conn);
        let serving = Serving {
            service: Arc::new(service),
            writer: Arc::new(tokio::sync::Mutex::new(wr)),
            handlers: JoinSet::new(),
        };
        Server {
            task: tokio::spawn(serving.run(rd)),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Writer = Arc<tokio::sync::Mutex<WriteHalf<Conn>>>;

struct Serving<P: Plugin> {
    service: Arc<Service<P>>,
    writer: Writer,
    /// The handlers running; dropped with the reading task, which cancels
    /// them.
    handlers: JoinSet<()>,
}

impl<P: Plugin> Serving<P> {
    async fn run(mut self, mut rd: ReadHalf<Conn>) {
        let mut buf = Vec::new();
        loop {
            while self.handlers.try_join_next().is_some() {}
            let mut head = [0u8; TTRPC_HEADER_LEN];
            if let Err(e) = rd.read_exact(&mut head).await {
                debug!("plugin service: connection ended: {e}");
                return;
            }
            let head = Header::parse(&head);
            if head.len > TTRPC_MESSAGE_LENGTH_MAX {
                // As ttrpc-rust: the message is read and dropped, and its
                // stream is told why.
                if let Err(e) = discard(&mut rd, head.len).await {
                    debug!("plugin service: connection ended: {e}");
                    return;
                }
                let status = ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, oversized(head.len));
                self.refuse(head.stream, status);
                continue;
            }
            buf.clear();
            if let Err(e) = read_envelope(&mut rd, &mut buf, head.len).await {
                debug!("plugin service: connection ended: {e}");
                return;
            }
            self.serve(head, &buf);
            if buf.capacity() > KEEP_CAPACITY {
                buf = Vec::new();
            }
        }
    }

    /// Starts serving one message.
    fn serve(&mut self, head: Header, body: &[u8]) {
        let invalid = |text: &str| ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, text);
        if head.stream % 2 != 1 {
            return self.refuse(head.stream, invalid("stream id must be odd"));
        }
        match head.kind {
            MESSAGE_TYPE_REQUEST => {}
            MESSAGE_TYPE_DATA => {
                return self.refuse(head.stream, invalid("Stream is no longer active"));
            }
            kind => {
                return error!("plugin service: message of unknown type {kind} ignored");
            }
        }
        let req = match Request::parse(body) {
            Ok(req) => req,
            Err(e) => return self.refuse(head.stream, invalid(&e.to_string())),
        };
        if req.service != PLUGIN_SERVICE {
            let text = format!("{} service does not exist", req.service);
            return self.refuse(head.stream, invalid(&text));
        }
        let call = Call {
            stream: head.stream,
            timeout: u64::try_from(req.timeout_nano)
                .ok()
                .filter(|&nanos| nanos > 0)
                .map(Duration::from_nanos),
            payload: req.payload,
        };
        macro_rules! methods {
            ($($name:literal => $handler:ident($req:ty),)*) => {
                match req.method {
                    $($name => self.start(call, |svc, req: $req| async move {
                        svc.$handler(req).await
                    }),)*
                    other => {
                        let status = ttrpc::get_status(
                            ttrpc::Code::UNIMPLEMENTED,
                            format!("{other} method"),
                        );
                        self.refuse(head.stream, status)
                    }
                }
            };
        }
        methods! {
            "Configure" => configure(api::ConfigureRequest),
            "Synchronize" => synchronize(api::SynchronizeRequest),
            "Shutdown" => shutdown(api::Empty),
            "RunPodSandbox" => run_pod_sandbox(api::RunPodSandboxRequest),
            "UpdatePodSandbox" => update_pod_sandbox(api::UpdatePodSandboxRequest),
            "PostUpdatePodSandbox" => post_update_pod_sandbox(api::PostUpdatePodSandboxRequest),
            "StopPodSandbox" => stop_pod_sandbox(api::StopPodSandboxRequest),
            "RemovePodSandbox" => remove_pod_sandbox(api::RemovePodSandboxRequest),
            "CreateContainer" => create_container(api::CreateContainerRequest),
            "PostCreateContainer" => post_create_container(api::PostCreateContainerRequest),
            "StartContainer" => start_container(api::StartContainerRequest),
            "PostStartContainer" => post_start_container(api::PostStartContainerRequest),
            "UpdateContainer" => update_container(api::UpdateContainerRequest),
            "PostUpdateContainer" => post_update_container(api::PostUpdateContainerRequest),
            "StopContainer" => stop_container(api::StopContainerRequest),
            "RemoveContainer" => remove_container(api::RemoveContainerRequest),
            "StateChange" => state_change(api::StateChangeEvent),
            "ValidateContainerAdjustment" => validate_container_adjustment(api::ValidateContainerAdjustmentRequest),
        }
    }

    /// Decodes the request of `call` and runs `handler` on it in a task of
    /// its own, which writes the answer.
    fn start<Req, Rsp, H, F>(&mut self, call: Call<'_>, handler: H)
    where
        Req: Message,
        Rsp: Message,
        H: FnOnce(Arc<Service<P>>, Req) -> F,
        F: Future<Output = ttrpc::Result<Rsp>> + Send + 'static,
    {
        let req = match Req::parse_from_bytes(call.payload) {
            Ok(req) => req,
            // ttrpc-rust's generated handler fails this way, as `Unknown`.
            Err(e) => {
                let status = ttrpc::get_status(
                    ttrpc::Code::UNKNOWN,
                    format!("ttrpc err: Unpack request error {e}"),
                );
                return self.refuse(call.stream, status);
            }
        };
        let handling = handler(Arc::clone(&self.service), req);
        let (stream, timeout) = (call.stream, call.timeout);
        let writer = Arc::clone(&self.writer);
        self.handlers.spawn(async move {
            let result = match timeout {
                None => handling.await,
                Some(limit) => match tokio::time::timeout(limit, handling).await {
                    Ok(result) => result,
                    Err(_) => Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
                        ttrpc::Code::DEADLINE_EXCEEDED,
                        "timeout",
                    ))),
                },
            };
            let message = match result {
                Ok(reply) => encode_response(stream, Ok(&reply)),
                // A handler's status goes as it is, another error as
                // ttrpc-rust's generated handler words it.
                Err(e) => {
                    let status = match e {
                        ttrpc::Error::RpcStatus(status) => status,
                        other => ttrpc::get_status(ttrpc::Code::UNKNOWN, format!("{other:?}")),
                    };
                    encode_response::<Rsp>(stream, Err(&status))
                }
            };
            write(&writer, &message).await;
        });
    }

    /// Answers `stream` with `status` alone, from a task of its own.
    fn refuse(&mut self, stream: u32, status: ttrpc::Status) {
        let message = encode_response::<api::Empty>(stream, Err(&status));
        let writer = Arc::clone(&self.writer);
        self.handlers
            .spawn(async move { write(&writer, &message).await });
    }
}

/// What a handler needs of a request's envelope.
struct Call<'a> {
    stream: u32,
    timeout: Option<Duration>,
    payload: &'a [u8],
}

async fn write(writer: &Writer, message: &[u8]) {
    // The mux takes a message whole or not at all; a write fails only
    // when the connection is gone, which ends the reading too.
    if let Err(e) = writer.lock().await.write_all(message).await {
        debug!("plugin service: answer not sent: {e}");
    }
}
