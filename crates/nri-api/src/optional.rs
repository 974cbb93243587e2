//! Optional values.
//!
//! NRI wraps optional scalars in single-field messages so that an absent
//! wrapper ("leave it alone") differs from a wrapper holding zero ("set it
//! to zero"). These helpers build and read such fields:
//!
//! ```
//! use nri_api::{optional, LinuxMemory, OptionalValue};
//! let mut mem = LinuxMemory::new();
//! mem.limit = optional::int64(0);
//! assert_eq!(mem.limit.value(), Some(0));
//! assert_eq!(mem.swap.value(), None);
//! ```

use protobuf::MessageField;

use super::{
    OptionalBool, OptionalFileMode, OptionalInt, OptionalInt32, OptionalInt64,
    OptionalRepeatedString, OptionalString, OptionalUInt32, OptionalUInt64,
};

/// Reads the value out of an optional wrapper field.
pub trait OptionalValue {
    type Value;
    /// `None` when the wrapper is absent.
    fn value(&self) -> Option<Self::Value>;
}

macro_rules! optional_wrapper {
    ($($ctor:ident: $wrapper:ident($value:ty)),* $(,)?) => {$(
        #[doc = concat!("A present `", stringify!($wrapper), "` holding `value`.")]
        pub fn $ctor(value: impl Into<$value>) -> MessageField<$wrapper> {
            MessageField::some($wrapper { value: value.into(), ..Default::default() })
        }

        impl From<$value> for $wrapper {
            fn from(value: $value) -> Self {
                $wrapper { value, ..Default::default() }
            }
        }

        impl OptionalValue for MessageField<$wrapper> {
            type Value = $value;
            fn value(&self) -> Option<$value> {
                self.as_ref().map(|w| w.value.clone())
            }
        }
    )*};
}

optional_wrapper! {
    string: OptionalString(String),
    repeated_string: OptionalRepeatedString(Vec<String>),
    int: OptionalInt(i64),
    int32: OptionalInt32(i32),
    uint32: OptionalUInt32(u32),
    int64: OptionalInt64(i64),
    uint64: OptionalUInt64(u64),
    boolean: OptionalBool(bool),
    file_mode: OptionalFileMode(u32),
}

/// Converts an `Option` into an optional wrapper field (`None` stays absent).
pub fn from_option<W, V>(value: Option<V>) -> MessageField<W>
where
    W: From<V>,
{
    MessageField::from_option(value.map(W::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_differs_from_zero() {
        let zero = int64(0);
        let absent: MessageField<OptionalInt64> = MessageField::none();
        assert_eq!(zero.value(), Some(0));
        assert_eq!(absent.value(), None);
        assert_eq!(from_option::<OptionalBool, bool>(None).value(), None);
        assert_eq!(
            from_option::<OptionalBool, _>(Some(false)).value(),
            Some(false)
        );
        assert_eq!(string("x").value().as_deref(), Some("x"));
        assert_eq!(
            repeated_string(vec!["a".to_string()]).value(),
            Some(vec!["a".to_string()])
        );
    }
}
