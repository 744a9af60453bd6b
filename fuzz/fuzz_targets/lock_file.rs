//! The lock-file parser, in both scopes: never panics, every error is one
//! line, and whatever parses renders to TOML that parses to the same lock.
#![no_main]

use chimera_host::plugins::trust::{LockFile, LockScope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for scope in [LockScope::Directory, LockScope::External] {
        match LockFile::parse_scoped(text, scope) {
            Ok(lock) => {
                let again = LockFile::parse_scoped(&lock.to_string(), scope)
                    .expect("a rendered lock parses");
                assert_eq!(again, lock);
            }
            Err(error) => assert!(!error.to_string().contains('\n'), "{error}"),
        }
    }
});
