//! Typed pointers at the boundary: borrowed arguments, output slots and
//! opaque handles. Every raw pointer an export receives becomes a Rust
//! reference or an [`OutSlot`] here, after its NULL check, so the unsafe
//! code that trusts a C caller is these few functions; an export's own
//! unsafe block only says which clause of its `# Safety` section meets the
//! helper's precondition.
//!
//! NULL is never trusted: the helpers that fail on it say "`<name>` is
//! NULL" with the caller's name for the argument, the texts the C and Go
//! tests expect.

use std::marker::PhantomData;
use std::ptr::NonNull;

use super::status::Failure;

/// A borrowed argument that must not be NULL: "`name` is NULL" otherwise.
///
/// # Safety
/// `p` is NULL or points to a `T` that is aligned, initialized, and not
/// written (by C or through a `&mut`) for `'a`.
pub(crate) unsafe fn arg_ref<'a, T>(name: &str, p: *const T) -> Result<&'a T, Failure> {
    // SAFETY: this function's contract: non-NULL means aligned, initialized
    // and unchanged for 'a; `as_ref` turns NULL into None.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(format!("{name} is NULL")))
}

/// A mutably borrowed argument that must not be NULL: "`name` is NULL"
/// otherwise.
///
/// # Safety
/// `p` is NULL or points to a `T` that is aligned, initialized, and not
/// read or written through any other pointer for `'a`.
pub(crate) unsafe fn arg_mut<'a, T>(name: &str, p: *mut T) -> Result<&'a mut T, Failure> {
    // SAFETY: this function's contract: non-NULL means aligned, initialized
    // and used through nothing else for 'a; `as_mut` turns NULL into None.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid(format!("{name} is NULL")))
}

/// The elements of a borrowed `(ptr, len)` array. NULL is allowed for
/// `len == 0`; otherwise it is "`what` is NULL but its length is `len`".
///
/// # Safety
/// `ptr` is valid for reads of `len` initialized `T`s (one allocation)
/// that are not changed for `'a`, or `len` is 0.
pub(crate) unsafe fn slice_arg<'a, T>(
    what: &str,
    ptr: *const T,
    len: usize,
) -> Result<&'a [T], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is NULL but its length is {len}"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(format!("{what} is not aligned")));
    }
    // SAFETY: this function's contract: `ptr` (not NULL and aligned,
    // checked above) is valid for reads of `len` initialized `T`s for 'a,
    // so within one allocation and at most isize::MAX bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A caller's output pointer, checked not NULL, written at most once
/// (`write` takes the slot). Exports create their slots before doing any
/// work and write them last, so a failed call writes nothing and a bad
/// slot never loses the outcome of work that was done.
pub(crate) struct OutSlot<'a, T> {
    ptr: NonNull<T>,
    _slot: PhantomData<&'a mut T>,
}

impl<'a, T> OutSlot<'a, T> {
    /// The slot behind a required output pointer: "`name` is NULL" for NULL.
    ///
    /// # Safety
    /// `p` is NULL or aligned and valid for writes of a `T` for `'a`, and
    /// nothing else reads or writes it meanwhile. What it holds before is
    /// neither read nor dropped, so it may be uninitialized.
    pub(crate) unsafe fn new(name: &str, p: *mut T) -> Result<OutSlot<'a, T>, Failure> {
        NonNull::new(p)
            .map(|ptr| OutSlot {
                ptr,
                _slot: PhantomData,
            })
            .ok_or_else(|| Failure::invalid(format!("{name} is NULL")))
    }

    /// The slot behind an optional output pointer: None for NULL, which
    /// means the caller does not want that output.
    ///
    /// # Safety
    /// As for [`OutSlot::new`].
    pub(crate) unsafe fn optional(p: *mut T) -> Option<OutSlot<'a, T>> {
        NonNull::new(p).map(|ptr| OutSlot {
            ptr,
            _slot: PhantomData,
        })
    }

    /// Hands `value` to the caller. The slot's previous content is not
    /// dropped: it belongs to C.
    pub(crate) fn write(self, value: T) {
        // SAFETY: `new`/`optional`'s contract: `ptr` (not NULL, checked
        // there) is aligned and writable for 'a, which outlives `self`.
        unsafe { self.ptr.as_ptr().write(value) }
    }
}

/// An opaque handle type: C holds a `*mut Self` that is a leaked
/// `Box<Self>`, created by the type's `_new` export (through
/// [`Handle::into_raw`]) and released by its `_free` (through
/// [`Handle::free`]), which accepts NULL. Every handle of this library is
/// owned that way; none is shared (`Arc`) with C. The provided functions
/// are the audited Box round trip: implementations only name the handle.
pub(crate) trait Handle: Sized {
    /// The argument's name in "`NAME` is NULL".
    const NAME: &'static str;

    /// Leaks `self` to C as a handle, released by [`Handle::free`] or
    /// taken back by [`Handle::take`].
    fn into_raw(self) -> *mut Self {
        Box::into_raw(Box::new(self))
    }

    /// The handle behind `p`, None for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a live handle (from [`Handle::into_raw`], not yet
    /// freed or taken) that is not freed or mutably borrowed for `'a`.
    unsafe fn get<'a>(p: *const Self) -> Option<&'a Self> {
        // SAFETY: this function's contract: a non-NULL `p` is a live Box
        // allocation, so aligned and initialized, and stays so for 'a.
        unsafe { p.as_ref() }
    }

    /// The handle behind `p`, which must not be NULL.
    ///
    /// # Safety
    /// As for [`Handle::get`].
    unsafe fn arg<'a>(p: *const Self) -> Result<&'a Self, Failure> {
        // SAFETY: this function's contract is `get`'s.
        unsafe { Self::get(p) }.ok_or_else(|| Failure::invalid(format!("{} is NULL", Self::NAME)))
    }

    /// The handle behind `p`, mutably, which must not be NULL.
    ///
    /// # Safety
    /// As for [`Handle::get`], and nothing else uses the handle for `'a`.
    unsafe fn arg_mut<'a>(p: *mut Self) -> Result<&'a mut Self, Failure> {
        // SAFETY: this function's contract: a live Box allocation used
        // through nothing else for 'a is what `arg_mut` needs.
        unsafe { arg_mut(Self::NAME, p) }
    }

    /// Takes the handle back from C: None for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a live handle, not used by C after this call.
    unsafe fn take(p: *mut Self) -> Option<Box<Self>> {
        // SAFETY: this function's contract: a non-NULL `p` came from
        // `Box::into_raw` in `into_raw` and is not used again, so the Box
        // is rebuilt once.
        NonNull::new(p).map(|p| unsafe { Box::from_raw(p.as_ptr()) })
    }

    /// Releases a handle; NULL is a no-op.
    ///
    /// # Safety
    /// As for [`Handle::take`].
    unsafe fn free(p: *mut Self) {
        // SAFETY: this function's contract is `take`'s.
        drop(unsafe { Self::take(p) });
    }
}

#[cfg(test)]
// Tests call the helpers on pointers they made a line before; a SAFETY
// comment on each call would repeat that.
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests {
    use super::*;
    use crate::status::nri_status;

    struct Thing(u32);

    impl Handle for Thing {
        const NAME: &'static str = "thing";
    }

    #[test]
    fn null_arguments_are_named() {
        let e = unsafe { arg_ref::<u32>("cb", std::ptr::null()) }.unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (nri_status::InvalidArgument, "cb is NULL")
        );
        let e = unsafe { arg_mut::<u32>("reply", std::ptr::null_mut()) }.unwrap_err();
        assert_eq!(e.message, "reply is NULL");
        let e = unsafe { Thing::arg(std::ptr::null()) }.err().unwrap();
        assert_eq!(e.message, "thing is NULL");
        let e = unsafe { OutSlot::<u32>::new("out", std::ptr::null_mut()) }
            .err()
            .unwrap();
        assert_eq!(e.message, "out is NULL");
        assert!(unsafe { OutSlot::<u32>::optional(std::ptr::null_mut()) }.is_none());
    }

    #[test]
    fn slots_are_written_and_handles_round_trip() {
        let mut out = 0u32;
        unsafe { OutSlot::new("out", &mut out) }.unwrap().write(7);
        assert_eq!(out, 7);
        let h = Thing(3).into_raw();
        assert_eq!(unsafe { Thing::arg(h) }.unwrap().0, 3);
        unsafe { Thing::arg_mut(h) }.unwrap().0 = 4;
        assert_eq!(unsafe { Thing::take(h) }.unwrap().0, 4);
        let h = Thing(5).into_raw();
        unsafe {
            Thing::free(h);
            Thing::free(std::ptr::null_mut());
        }
        assert!(unsafe { Thing::get(std::ptr::null()) }.is_none());
    }
}
