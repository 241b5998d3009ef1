//! `RegisteredVec<T>`: a caller's vector page-locked in place for full-speed copies.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use bytemuck::Pod;
use zkpipe_cuda::result::mem;
use zkpipe_cuda::Context;

use crate::{PinnedMemory, Result};

/// A `Vec<T>` registered with the driver (`cuMemHostRegister`) for as long as this lives.
///
/// Registering costs about 55-65 ms per GiB, far less than copying into pinned memory through
/// pageable copies; [`RegisteredVec::into_inner`] unregisters and gives the vector back. The
/// vector is owned so that it can neither move nor be freed while registered.
#[derive(Debug)]
pub struct RegisteredVec<T> {
    vec: Vec<T>,
    ctx: Arc<Context>,
    registered: bool,
}

impl<T: Pod> RegisteredVec<T> {
    /// Page-locks `vec`'s elements.
    pub fn new(ctx: &Arc<Context>, vec: Vec<T>) -> Result<Self> {
        let bytes = std::mem::size_of_val(vec.as_slice());
        if bytes > 0 {
            ctx.bind()?;
            // SAFETY: the vector's buffer is mapped, `bytes` long, and is neither moved nor
            // freed until `Drop`/`into_inner` unregisters it (we own the vector and never grow
            // it).
            unsafe {
                mem::host_register(
                    vec.as_ptr().cast_mut().cast(),
                    bytes,
                    mem::HOST_REGISTER_PORTABLE,
                )
            }?;
        }
        Ok(Self {
            vec,
            ctx: Arc::clone(ctx),
            registered: bytes > 0,
        })
    }

    /// Unregisters and returns the vector.
    pub fn into_inner(mut self) -> Result<Vec<T>> {
        self.unregister()?;
        Ok(std::mem::take(&mut self.vec))
    }

    fn unregister(&mut self) -> Result<()> {
        if std::mem::take(&mut self.registered) {
            self.ctx.bind()?;
            // SAFETY: registered in `new`; owners of in-flight copies hold this value, so none
            // is in flight when it is unregistered.
            unsafe { mem::host_unregister(self.vec.as_ptr().cast_mut().cast()) }?;
        }
        Ok(())
    }
}

impl<T> Deref for RegisteredVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.vec
    }
}

impl<T> DerefMut for RegisteredVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.vec
    }
}

impl<T> Drop for RegisteredVec<T> {
    fn drop(&mut self) {
        if self.registered {
            // The release is attempted even when the bind fails (the handle is never used
            // again, so not releasing it would leak it).
            let bound = self.ctx.bind();
            let released = {
                // SAFETY: as in `unregister`.
                unsafe { mem::host_unregister(self.vec.as_ptr().cast_mut().cast()) }
            };
            let r = bound.and(released);
            if let Err(e) = r {
                self.ctx.record_err(e);
            }
        }
    }
}

// SAFETY: the vector's heap buffer is registered and does not move when `self` moves.
unsafe impl<T: Pod + Send> PinnedMemory<T> for RegisteredVec<T> {}
