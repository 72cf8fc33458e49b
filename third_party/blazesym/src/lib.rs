//! blazesym-c's C API, linked as one static library (see Cargo.toml): its `#[no_mangle]`
//! functions come with the crate; this re-export only keeps the crate linked in.
pub use blazesym_c::*;
