//! The plugin manager: load by name, by file or in-process; reload;
//! unload; list.
//!
//! [`load`] holds the manager and loading, listing and unloading;
//! [`reload`] a reload and the hand-over of state to the new build;
//! [`pack_plugin`] packs (in this process or isolated) seen as plugins,
//! with the failure policy, roles and stream windows they declare.

mod load;
mod pack_plugin;
mod reload;

pub use load::{PackInfo, PackSource, PluginManager};
pub use pack_plugin::{interceptors_of, MAX_STREAM_WINDOW};
pub use reload::ReloadOutcome;
