//! Runnable examples; see `README.md`. The library part is empty: the
//! examples are the `[[example]]` targets next to this file.
