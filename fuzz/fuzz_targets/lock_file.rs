//! The lock-file parser: never panics; whatever parses re-renders to text
//! that parses to the same lock.
#![no_main]

use chimera_host::plugins::trust::LockFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(lock) = LockFile::parse(text) {
        let again = LockFile::parse(&lock.to_string()).expect("a rendered lock parses");
        assert_eq!(again, lock);
    }
});
