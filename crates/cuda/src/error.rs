//! The crate's error type: a missing driver, a failed driver call with its code and name, and
//! the checks this crate makes before it calls the driver.

use std::ffi::{c_char, CStr};

use crate::sys::Api;

/// `CUDA_ERROR_NO_DEVICE`: a driver with no device behind it.
pub const CUDA_ERROR_NO_DEVICE: u32 = 100;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: u32 = 2;
/// `CUDA_ERROR_NOT_FOUND`: e.g. a function name missing from a module.
pub const CUDA_ERROR_NOT_FOUND: u32 = 500;

/// Driver statuses after which, as the driver API's reference says of each, "the process \[is\]
/// in an inconsistent state and any further CUDA work will return the same error":
/// `CUDA_ERROR_ILLEGAL_ADDRESS` (700), `LAUNCH_TIMEOUT` (702), `HARDWARE_STACK_ERROR` (714),
/// `ILLEGAL_INSTRUCTION` (715), `MISALIGNED_ADDRESS` (716), `INVALID_ADDRESS_SPACE` (717),
/// `INVALID_PC` (718) and `LAUNCH_FAILED` (719).
pub const STICKY_CODES: [u32; 8] = [700, 702, 714, 715, 716, 717, 718, 719];

/// Everything that can go wrong in zkpipe-cuda.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No library of the driver could be opened.
    #[error("no CUDA driver found: tried {}", tried.join(", "))]
    NoDriver { tried: Vec<String> },
    /// The driver library lacks an entry point this crate needs.
    #[error("the CUDA driver {library} lacks {symbol}: {reason}")]
    MissingSymbol {
        library: String,
        symbol: &'static str,
        reason: String,
    },
    /// A driver call failed.
    #[error("{call} failed: {name} ({code}): {message}")]
    Driver {
        call: &'static str,
        code: u32,
        name: String,
        message: String,
    },
    /// The driver is there, but it sees no device.
    #[error("no CUDA device: the driver reports {count} devices")]
    NoDevice { count: usize },
    /// A device ordinal past the last device.
    #[error("device {ordinal} does not exist: the driver reports {count} devices")]
    DeviceOutOfRange { ordinal: usize, count: usize },
    /// A device named by UUID or PCI bus id that the driver does not report.
    #[error("no device matches {name:?}: the driver reports {known}")]
    NoSuchDevice { name: String, known: String },
    /// A device listed twice (one device listed twice is not two devices).
    #[error("device {ordinal} is listed twice ({first:?} and {second:?})")]
    DeviceListedTwice {
        ordinal: usize,
        first: String,
        second: String,
    },
    /// Source and destination of a copy differ in length.
    #[error(
        "{what}: lengths differ: source has {source_len} elements, destination {destination_len}"
    )]
    LengthMismatch {
        what: &'static str,
        source_len: usize,
        destination_len: usize,
    },
    /// A block of columns that does not fit the buffer's rows.
    #[error("column block {col}..{col}+{width} does not fit rows of {pitch} elements in a buffer of {len} (the rows must divide the buffer and hold the block)")]
    ColumnBlock {
        len: usize,
        pitch: usize,
        col: usize,
        width: usize,
    },
    /// A range reaches past the end of a buffer.
    #[error("{what}: range {start}..{end} is outside a buffer of {len} elements")]
    OutOfRange {
        what: &'static str,
        start: usize,
        end: usize,
        len: usize,
    },
    /// No form of a module's image runs on the device under this driver.
    #[error(transparent)]
    NoKernelImage(Box<NoKernelImage>),
    /// An embedded image that cannot be unpacked.
    #[error("module {module}: the {form} image cannot be read: {reason}")]
    BadImage {
        module: &'static str,
        form: String,
        reason: String,
    },
    /// A module has no function of that name.
    #[error("module {module} has no function {function}")]
    FunctionNotFound { module: String, function: String },
    /// A launch with the wrong number of arguments.
    #[error("kernel {function} takes {expected} arguments, {given} given")]
    ArgumentCount {
        function: String,
        expected: usize,
        given: usize,
    },
    /// A launch argument whose size differs from the kernel's parameter.
    #[error("kernel {function}: argument {index} is {given} bytes, the parameter is {expected}")]
    ArgumentSize {
        function: String,
        index: usize,
        expected: usize,
        given: usize,
    },
    /// A launch shape the device cannot run.
    #[error("kernel {function}: invalid launch: {reason}")]
    InvalidLaunch { function: String, reason: String },
    /// An allocation the device cannot satisfy.
    #[error("out of device memory: {needed} bytes needed, {free} free")]
    OutOfDeviceMemory { needed: usize, free: usize },
    /// Stream-ordered allocation was asked for on a driver without it.
    #[error("the driver lacks {symbol} (stream-ordered memory needs CUDA 11.2 or later)")]
    Unsupported { symbol: &'static str },
    /// A byte count that does not fit the address space.
    #[error("{what}: {count} elements of {size} bytes overflow the address space")]
    SizeOverflow {
        what: &'static str,
        count: usize,
        size: usize,
    },
}

impl Error {
    /// Builds a [`Error::Driver`] for `code`, asking the driver for its name and text.
    pub(crate) fn from_code_with(api: &Api, call: &'static str, code: u32) -> Self {
        let text = |f: unsafe extern "C" fn(u32, *mut *const c_char) -> u32| {
            let mut ptr: *const c_char = std::ptr::null();
            // SAFETY: the driver writes a pointer to a static NUL-terminated string, or fails
            // and leaves `ptr` null.
            let status = unsafe { f(code, &mut ptr) };
            if status != 0 || ptr.is_null() {
                return "unknown".to_string();
            }
            // SAFETY: checked non-null above; the string is static in the driver.
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        };
        Self::Driver {
            call,
            code,
            name: text(api.cuGetErrorName),
            message: text(api.cuGetErrorString),
        }
    }

    /// The driver's status code, for driver errors.
    pub fn code(&self) -> Option<u32> {
        match self {
            Self::Driver { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True for a driver status after which the context that reported it is unusable for the
    /// rest of the process (a kernel's fault: an illegal address or instruction, a launch
    /// failure or timeout): every later call on it fails ([`STICKY_CODES`]).
    pub fn is_sticky(&self) -> bool {
        self.code().is_some_and(|c| STICKY_CODES.contains(&c))
    }

    /// True when the error says there is no usable GPU (no driver, or no device).
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Self::NoDriver { .. } | Self::NoDevice { .. })
            || self.code() == Some(CUDA_ERROR_NO_DEVICE)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// No form of a module's image runs on the device under this driver: the module, the device's
/// architecture, the driver, the forms the image carries and those the driver refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no kernel image of module {module} runs on this device (sm_{}{}) under {}: it carries {carried}{}", arch.0, arch.1, driver.map_or("this driver".to_string(), |(x, y)| format!("the CUDA {x}.{y} driver")), if refused.is_empty() { String::new() } else { format!("; refused: {}", refused.join("; ")) })]
pub struct NoKernelImage {
    pub module: &'static str,
    pub arch: (u32, u32),
    pub driver: Option<(u32, u32)>,
    pub carried: String,
    pub refused: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(code: u32) -> Error {
        Error::Driver {
            call: "cuTest",
            code,
            name: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn sticky_statuses_are_the_kernel_faults_only() {
        for code in STICKY_CODES {
            assert!(driver(code).is_sticky(), "{code}");
        }
        for code in [
            1,
            CUDA_ERROR_OUT_OF_MEMORY,
            CUDA_ERROR_NO_DEVICE,
            201,
            701,
            720,
            999,
        ] {
            assert!(!driver(code).is_sticky(), "{code}");
        }
        assert!(!Error::NoDevice { count: 0 }.is_sticky());
    }
}
