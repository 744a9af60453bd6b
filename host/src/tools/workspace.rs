//! PLACEHOLDER until the tools land: the workspace confinement.

use std::path::{Path, PathBuf};

/// The directory tools are confined to.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist).
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(Workspace {
            root: root.as_ref().canonicalize()?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
