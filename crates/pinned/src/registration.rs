//! The driver registration of memory a value owns (`cuMemHostRegister`, portable), made on
//! first request through a shared reference and released when the owner drops.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use zkpipe_cuda::result::mem;
use zkpipe_cuda::Context;

use crate::Result;

/// Whether, and by which context, an owner's memory is registered.
#[derive(Debug, Default)]
pub(crate) struct Registration {
    by: Mutex<Option<Arc<Context>>>,
}

impl Registration {
    /// Registers `bytes` bytes at `ptr` with `flags` (portable is added) unless they already
    /// are; true when this call registered them. Nothing is registered for zero bytes.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is mapped memory that stays mapped, unmoved, until
    /// [`Registration::release`] has run, and is the same range at every call.
    pub(crate) unsafe fn register(
        &self,
        ctx: &Arc<Context>,
        ptr: *const c_void,
        bytes: usize,
        flags: u32,
    ) -> Result<bool> {
        let mut slot = self.by.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() || bytes == 0 {
            return Ok(false);
        }
        ctx.bind()?;
        // SAFETY: as the caller promises.
        unsafe { mem::host_register(ptr.cast_mut(), bytes, mem::HOST_REGISTER_PORTABLE | flags) }?;
        *slot = Some(Arc::clone(ctx));
        Ok(true)
    }

    /// True once the memory is registered.
    pub(crate) fn is_registered(&self) -> bool {
        self.by
            .lock()
            .map(|s| s.is_some())
            .unwrap_or_else(|p| p.into_inner().is_some())
    }

    /// Unregisters the memory at `ptr` if it is registered. A failure is recorded on the
    /// context (the owner is being dropped: there is no one to return it to). The release is
    /// attempted even when the bind fails: the handle is never used again.
    ///
    /// # Safety
    /// `ptr` is the start of the range given to [`Registration::register`], and no copy from
    /// or to it is in flight.
    pub(crate) unsafe fn release(&mut self, ptr: *const c_void) {
        let slot = self.by.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(ctx) = slot.take() {
            let bound = ctx.bind();
            // SAFETY: as the caller promises.
            let released = unsafe { mem::host_unregister(ptr.cast_mut()) };
            if let Err(e) = bound.and(released) {
                ctx.record_err(e);
            }
        }
    }
}
