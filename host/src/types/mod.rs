//! Host-native conversation types (serde). Interceptors, providers, tools and
//! the transcript all speak these; the ABI views are built from them, borrowed.

mod arguments;
mod message;
mod request;
mod text;
mod tool_call;
mod tool_result;

pub use arguments::Arguments;
pub use message::{ContentBlock, Message, Role};
pub use request::{Headers, ProviderRequest, ToolList, ToolSchema};
pub use text::{error_chain, one_line, terminal_safe};
pub use tool_call::ToolCall;
pub use tool_result::ToolResult;
