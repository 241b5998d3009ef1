//! Where a matrix's arrays lie: a vector of their own (a recording made in this process), or
//! a range of a recording file mapped read-only (a recording read from disk, in the page
//! cache and shared by every process that reads it).

use std::ops::Deref;
use std::sync::Arc;

use zkpipe_cuda::Context;
use zkpipe_pinned::{PinnableMap, PinnableVec};

/// One array of u32 values of a matrix.
#[derive(Debug)]
pub(crate) enum Array {
    Owned(PinnableVec<u32>),
    Mapped(MappedArray),
}

/// `len` u32 values at byte `offset` of a mapped file.
#[derive(Debug, Clone)]
pub(crate) struct MappedArray {
    file: Arc<PinnableMap>,
    offset: usize,
    len: usize,
}

impl MappedArray {
    /// The array at `offset`, or `None` when it does not lie within the file or is not
    /// aligned for u32 reads.
    pub(crate) fn new(file: &Arc<PinnableMap>, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len.checked_mul(4)?)?;
        let bytes = file.bytes().get(offset..end)?;
        bytemuck::try_cast_slice::<u8, u32>(bytes).ok()?;
        Some(Self {
            file: Arc::clone(file),
            offset,
            len,
        })
    }
}

impl Array {
    /// Page-locks the memory behind the array, once; true when this call did. A mapped
    /// array's whole file is locked (its arrays share pages at their edges).
    pub(crate) fn pin(&self, ctx: &Arc<Context>) -> Result<bool, zkpipe_pinned::Error> {
        match self {
            Array::Owned(v) => v.pin(ctx),
            Array::Mapped(m) => m.file.pin(ctx),
        }
    }

    /// True once the memory behind the array is page-locked.
    pub(crate) fn is_pinned(&self) -> bool {
        match self {
            Array::Owned(v) => v.is_pinned(),
            Array::Mapped(m) => m.file.is_pinned(),
        }
    }
}

impl Deref for Array {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            Array::Owned(v) => v,
            // In bounds and aligned: checked when the array was made, and the mapping never
            // changes.
            Array::Mapped(m) => {
                bytemuck::cast_slice(&m.file.bytes()[m.offset..m.offset + 4 * m.len])
            }
        }
    }
}

impl Clone for Array {
    /// An owned array is copied (not page-locked); a mapped one shares its file.
    fn clone(&self) -> Self {
        match self {
            Array::Owned(v) => Array::Owned(v.clone()),
            Array::Mapped(m) => Array::Mapped(m.clone()),
        }
    }
}
