//! How much work a merge does, counted so that tests can show that it
//! grows linearly with a reply's size (`scale` and `props` tests).
//!
//! Two counts, both per thread and independent of the machine's speed:
//!
//! * **steps**: the merge calls [`steps`] once per element it visits, in
//!   every loop over a reply, over the merged reply and over the request's
//!   container, and once per comparison when it sorts;
//! * **allocation**: under `cfg(test)` the global allocator counts calls
//!   and bytes, which catches copies of growing collections wherever they
//!   happen, in this crate or in `nri-api`.
//!
//! Outside tests [`steps`] compiles to nothing, unless the `fuzzing`
//! feature asks for the step count (the fuzz targets bound the work by it).

#[cfg(any(test, feature = "fuzzing"))]
thread_local! {
    pub(super) static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Records `n` elementary steps of merging.
#[inline(always)]
pub(super) fn steps(n: usize) {
    #[cfg(any(test, feature = "fuzzing"))]
    STEPS.with(|s| s.set(s.get() + n as u64));
    #[cfg(not(any(test, feature = "fuzzing")))]
    let _ = n;
}

/// The steps counted on this thread so far.
#[cfg(feature = "fuzzing")]
pub(crate) fn steps_so_far() -> u64 {
    STEPS.with(std::cell::Cell::get)
}

#[cfg(test)]
pub(super) use counted::*;

#[cfg(test)]
mod counted {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use super::STEPS;

    thread_local! {
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
        static BYTES: Cell<u64> = const { Cell::new(0) };
    }

    /// The work done on this thread while running `f`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(in super::super) struct Work {
        pub(in super::super) steps: u64,
        pub(in super::super) allocs: u64,
        pub(in super::super) bytes: u64,
    }

    /// Runs `f` and counts the work it does on this thread.
    pub(in super::super) fn measure<R>(f: impl FnOnce() -> R) -> (R, Work) {
        let before = now();
        let out = f();
        let after = now();
        let work = Work {
            steps: after.steps - before.steps,
            allocs: after.allocs - before.allocs,
            bytes: after.bytes - before.bytes,
        };
        (out, work)
    }

    fn now() -> Work {
        Work {
            steps: STEPS.with(Cell::get),
            allocs: ALLOCS.with(Cell::get),
            bytes: BYTES.with(Cell::get),
        }
    }

    /// The system allocator, counting what each thread asks of it.
    struct Counting;

    fn count(bytes: usize) {
        // `try_with`: a thread being torn down may still allocate.
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        let _ = BYTES.try_with(|b| b.set(b.get() + bytes as u64));
    }

    // SAFETY: every call is passed on to `System` unchanged; counting
    // touches only const-initialized thread-locals, which never allocate.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            // SAFETY: the caller's contract for `alloc` is passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract for `dealloc` is passed on.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size);
            // SAFETY: the caller's contract for `realloc` is passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;
}
