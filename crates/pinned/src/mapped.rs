//! `PinnableMap`: a file mapped read-only into memory, which can be page-locked in place
//! later through a shared reference (a recording's matrices, read where they lie in the page
//! cache and shared by every job through `Arc`).

use std::fs::File;
use std::sync::Arc;

use zkpipe_cuda::result::mem;
use zkpipe_cuda::Context;

use crate::registration::Registration;
use crate::Result;

/// A whole file mapped read-only. Its pages are the page cache's: reading it makes no copy,
/// processes mapping the same file share them, and the kernel may drop clean pages under
/// pressure and read them again. It can be registered with the driver (`cuMemHostRegister`,
/// portable and read-only) on first request, so that copies from it run at pinned speed;
/// it is unregistered when dropped.
///
/// The file must not be changed in place while mapped: zkpipe writes such files through a
/// temporary file renamed over the old one, which leaves a mapping of the old one intact.
/// Another program truncating the file in place would make reads past its new end fault.
#[derive(Debug)]
pub struct PinnableMap {
    map: memmap2::Mmap,
    registration: Registration,
}

impl PinnableMap {
    /// Maps all of `file` read-only.
    pub fn open(file: &File) -> std::io::Result<Self> {
        // SAFETY: the mapping is read-only and private to this value; the file is not changed
        // in place while mapped (the type's contract, kept by every writer in zkpipe).
        let map = unsafe { memmap2::Mmap::map(file) }?;
        Ok(Self {
            map,
            registration: Registration::default(),
        })
    }

    /// Asks the kernel to read the file's pages into the page cache ahead of use
    /// (`MADV_WILLNEED`); it returns at once and the reads go on in the background.
    pub fn prefetch(&self) -> std::io::Result<()> {
        self.map.advise(memmap2::Advice::WillNeed)
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Registers the mapping with the driver unless it already is. Returns true when this
    /// call registered it. Every page is read in and locked: it costs the file's size in
    /// locked host memory until dropped.
    pub fn pin(&self, ctx: &Arc<Context>) -> Result<bool> {
        // SAFETY: the mapping is `len` bytes of mapped memory that lives as long as `self`,
        // whose `Drop` releases the registration before unmapping; it is registered
        // read-only, as it is mapped.
        unsafe {
            self.registration.register(
                ctx,
                self.map.as_ptr().cast(),
                self.map.len(),
                mem::HOST_REGISTER_READ_ONLY,
            )
        }
    }

    /// True once the mapping is registered.
    pub fn is_pinned(&self) -> bool {
        self.registration.is_registered()
    }
}

impl Drop for PinnableMap {
    fn drop(&mut self) {
        let ptr = self.map.as_ptr().cast();
        // SAFETY: the range registered in `pin`; copies from it are synchronous or waited by
        // their owners, who hold an `Arc` of it, so none is in flight now.
        unsafe { self.registration.release(ptr) }
    }
}
