//! The one error type: every fallible call returns [`Result<T>`].
use std::ffi::CStr;
use std::fmt;

use strideweave_sys as sys;

/// The code of an [`Error`]: the C ABI's `sw_error_code_t`, whose numbers
/// are pinned forever.
///
/// New codes are only ever appended to the C enum; a code this crate does
/// not know yet arrives as [`ErrorCode::Other`] with its number, and this
/// enum is `#[non_exhaustive]` so that naming it later is not a breaking
/// change.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Wrong handle kind, dtype or class (`SW_ERROR_TYPE`).
    Type,
    /// Bad shape, size, range or option (`SW_ERROR_VALUE`).
    Value,
    /// Released, pending, owned, pinned, conflicting or modified in place
    /// (`SW_ERROR_STATE`).
    State,
    /// A valid request this build cannot do (`SW_ERROR_UNSUPPORTED`).
    Unsupported,
    /// A coordinate, slot or axis out of range (`SW_ERROR_INDEX`).
    Index,
    /// An allocation failed (`SW_ERROR_OUT_OF_MEMORY`).
    OutOfMemory,
    /// File or system I/O failed (`SW_ERROR_IO`).
    Io,
    /// Stored data failed its checksum or decode (`SW_ERROR_DATA_CORRUPT`).
    DataCorrupt,
    /// The device was lost (`SW_ERROR_DEVICE_LOST`).
    DeviceLost,
    /// A handle from an older device generation (`SW_ERROR_STALE_HANDLE`).
    StaleHandle,
    /// A wait expired (`SW_ERROR_TIMEOUT`).
    Timeout,
    /// Work was cancelled, e.g. by a runtime shutdown (`SW_ERROR_CANCELLED`).
    Cancelled,
    /// A bug in StrideWeave (`SW_ERROR_INTERNAL`).
    Internal,
    /// A code this version of the crate does not name.
    Other(i32),
}

impl ErrorCode {
    /// The code of a C `sw_error_code_t` value.
    pub fn from_raw(raw: sys::sw_error_code_t) -> ErrorCode {
        match raw {
            sys::sw_error_code_t::SW_ERROR_TYPE => ErrorCode::Type,
            sys::sw_error_code_t::SW_ERROR_VALUE => ErrorCode::Value,
            sys::sw_error_code_t::SW_ERROR_STATE => ErrorCode::State,
            sys::sw_error_code_t::SW_ERROR_UNSUPPORTED => ErrorCode::Unsupported,
            sys::sw_error_code_t::SW_ERROR_INDEX => ErrorCode::Index,
            sys::sw_error_code_t::SW_ERROR_OUT_OF_MEMORY => ErrorCode::OutOfMemory,
            sys::sw_error_code_t::SW_ERROR_IO => ErrorCode::Io,
            sys::sw_error_code_t::SW_ERROR_DATA_CORRUPT => ErrorCode::DataCorrupt,
            sys::sw_error_code_t::SW_ERROR_DEVICE_LOST => ErrorCode::DeviceLost,
            sys::sw_error_code_t::SW_ERROR_STALE_HANDLE => ErrorCode::StaleHandle,
            sys::sw_error_code_t::SW_ERROR_TIMEOUT => ErrorCode::Timeout,
            sys::sw_error_code_t::SW_ERROR_CANCELLED => ErrorCode::Cancelled,
            sys::sw_error_code_t::SW_ERROR_INTERNAL => ErrorCode::Internal,
            other => ErrorCode::Other(other.0 as i32),
        }
    }

    /// The C value of this code.
    pub fn to_raw(self) -> sys::sw_error_code_t {
        use sys::sw_error_code_t as C;
        match self {
            ErrorCode::Type => C::SW_ERROR_TYPE,
            ErrorCode::Value => C::SW_ERROR_VALUE,
            ErrorCode::State => C::SW_ERROR_STATE,
            ErrorCode::Unsupported => C::SW_ERROR_UNSUPPORTED,
            ErrorCode::Index => C::SW_ERROR_INDEX,
            ErrorCode::OutOfMemory => C::SW_ERROR_OUT_OF_MEMORY,
            ErrorCode::Io => C::SW_ERROR_IO,
            ErrorCode::DataCorrupt => C::SW_ERROR_DATA_CORRUPT,
            ErrorCode::DeviceLost => C::SW_ERROR_DEVICE_LOST,
            ErrorCode::StaleHandle => C::SW_ERROR_STALE_HANDLE,
            ErrorCode::Timeout => C::SW_ERROR_TIMEOUT,
            ErrorCode::Cancelled => C::SW_ERROR_CANCELLED,
            ErrorCode::Internal => C::SW_ERROR_INTERNAL,
            ErrorCode::Other(n) => sys::sw_error_code_t(n as _),
        }
    }

    /// The library's name of the code: "TYPE", "VALUE", ...; "UNKNOWN" for
    /// a number it does not know.
    pub fn name(self) -> &'static str {
        // SAFETY: sw_error_code_name returns static storage for any number.
        unsafe { static_str(sys::sw_error_code_name(self.to_raw())) }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error of the library or of this binding: a code and a message naming
/// the problem. A call that fails changes nothing (the C ABI's rule), so a
/// value, version or ownership never moves on an `Err`.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
}

impl Error {
    /// An error with `code` and `message`; a [`ResidencyPolicy`] returns one
    /// to refuse a request, and the library hands the caller the same code
    /// and message.
    ///
    /// [`ResidencyPolicy`]: crate::ResidencyPolicy
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }

    /// The error's code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Takes over a non-NULL `sw_error_t*` and frees it.
    ///
    /// # Safety
    /// `raw` must be an error the library returned, owned by the caller and
    /// not used afterwards.
    pub unsafe fn from_raw(raw: *mut sys::sw_error_t) -> Error {
        let code = ErrorCode::from_raw(sys::sw_error_code(raw));
        let message = CStr::from_ptr(sys::sw_error_message(raw)).to_string_lossy().into_owned();
        sys::sw_error_free(raw);
        Error { code, message }
    }

    /// A new `sw_error_t*` with this code and message, owned by the caller
    /// (for handing an error to the library, as a policy's plan does).
    pub fn to_raw(&self) -> *mut sys::sw_error_t {
        let text = std::ffi::CString::new(self.message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: text is a valid NUL-terminated string for the call.
        unsafe { sys::sw_error_create(self.code.to_raw(), text.as_ptr()) }
    }

    pub(crate) fn type_(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Type, message)
    }

    pub(crate) fn value(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Value, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("code", &self.code).field("message", &self.message).finish()
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

/// A `'static` string from a C function returning static storage.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string in static storage.
pub(crate) unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}
