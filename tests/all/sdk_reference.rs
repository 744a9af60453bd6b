//! The reference a third party writes packs from, pinned through the real
//! binary and the real libraries: which SDK versions load, state handover,
//! `chimera --version`, `tools list`, `packs list`.

mod compatibility;
mod events;
mod handover;
