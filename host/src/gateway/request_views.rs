//! A model-call request read into views, over any of the wires that ask
//! the model for a reply (chat completions, Messages, Responses): what
//! they share is here once, what differs is each wire's
//! [`RequestFormat`].
//!
//! | step | shared | the wire's |
//! |---|---|---|
//! | read | the body an object, `model`, each tool ([`ToolFormat`]), `stream`, every other member the envelope's `kwargs` | its messages, with their places; what a request continues |
//! | write, same shape | each changed text and description at its place | — |
//! | write, a new shape | the tool list re-encoded, each kept tool keeping its bytes | the messages' members re-encoded; a tool as it writes one |

use super::views::{self, Placed, PlacedTool};
use super::wire::RequestView;
use crate::agent::RelayRequest;
use crate::jsondoc::{Node, Splice};
use crate::types::{Headers, Message, ToolList, ToolSchema};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::marker::PhantomData;

/// A top-level member a write-back sets (`None`: drops).
pub(super) type Member = (String, Option<Vec<u8>>);

/// What a tool's `type` says to a wire.
pub(super) enum ToolKinds {
    /// Nothing: every tool is one the client wrote, its schema in this
    /// member or, when it has none (a server tool), its whole value.
    Untyped(&'static str),
    /// The `type`s of the tools a client writes, each with the member
    /// holding its schema (an empty object schema when it is left out).
    /// A tool of any other `type` is a built-in one: named by its type
    /// (`tool` when it has none), its whole value its parameters.
    Typed(&'static [(&'static str, &'static str)]),
}

/// How a wire writes its tools (see [`tool_of`]).
pub(super) struct ToolFormat {
    /// What a tool's `type` says.
    pub(super) kinds: ToolKinds,
    /// The member of a client's tool that holds its name, description and
    /// schema (`function`), or `None`: the tool itself.
    pub(super) within: Option<&'static str>,
    /// What a request is told when a client's tool has no name.
    pub(super) no_name: &'static str,
}

/// One tool as `format` says its wire writes it, and where it lives: its
/// description is judged (and written back at its place), its name and
/// schema are what the seams see.
///
/// # Errors
///
/// One line naming the member that is missing or not what the wire says.
fn tool_of(
    src: &[u8],
    tool: &Node,
    format: &ToolFormat,
) -> Result<(ToolSchema, PlacedTool), String> {
    if tool.as_object().is_none() {
        return Err("a tool must be an object".to_owned());
    }
    let mut place = PlacedTool {
        value: tool.span.clone(),
        description: None,
    };
    let schema = match format.kinds {
        ToolKinds::Untyped(schema) => schema,
        ToolKinds::Typed(kinds) => {
            let kind = tool.get(src, "type").and_then(|t| t.text(src));
            if let Some((_, schema)) = kinds.iter().find(|(k, _)| kind.as_deref() == Some(*k)) {
                schema
            } else {
                // A built-in tool: its type is its name; the rest is the
                // upstream's to read.
                let name = kind.unwrap_or(Cow::Borrowed("tool")).into_owned();
                return Ok((
                    ToolSchema {
                        name,
                        description: String::new(),
                        parameters: tool.to_value(src),
                    },
                    place,
                ));
            }
        }
    };
    let (holder, prefix) = match format.within {
        Some(member) => (
            tool.get(src, member)
                .ok_or_else(|| format!("a tool needs `{member}`"))?,
            format!("{member}."),
        ),
        None => (tool, String::new()),
    };
    let name = views::member_text(src, holder, "name").ok_or(format.no_name)?;
    let description = match holder.get(src, "description") {
        Some(node) if !node.is_null() => {
            place.description = Some(node.span.clone());
            views::text(src, node)
                .ok_or_else(|| format!("`{prefix}description` must be a string"))?
        }
        _ => String::new(),
    };
    let parameters = match (holder.get(src, schema), &format.kinds) {
        (Some(schema), _) => schema.to_value(src),
        (None, ToolKinds::Untyped(_)) => tool.to_value(src),
        (None, ToolKinds::Typed(_)) => json!({"type": "object", "properties": {}}),
    };
    Ok((
        ToolSchema {
            name: name.into_owned(),
            description,
            parameters,
        },
        place,
    ))
}

/// What differs from wire to wire in how a model-call request is read
/// into views and written back (implemented by each wire).
pub(super) trait RequestFormat: Sized + Send + Sync + 'static {
    /// How its tools are written.
    const TOOLS: ToolFormat;
    /// The top-level members it reads: every other is the envelope's
    /// `kwargs`.
    const MEMBERS: &'static [&'static str];

    /// Its messages (what the seams see) and where each one's texts live.
    ///
    /// # Errors
    ///
    /// One line naming the member that is missing or not what the wire
    /// says.
    fn messages(src: &[u8], root: &Node) -> Result<(Vec<Message>, Vec<Placed>), String>;

    /// The response a request continues, when the wire chains them
    /// (read after everything else).
    ///
    /// # Errors
    ///
    /// One line when the member that names it is not what the wire says.
    fn previous(_src: &[u8], _root: &Node) -> Result<Option<String>, String> {
        Ok(None)
    }

    /// The members that carry `judged`'s messages when their shape changed
    /// (a message added, dropped or reordered: a compaction, a policy's
    /// note).
    fn reshape(doc: &Document<'_, Self>, judged: &[Message]) -> Vec<Member>;

    /// A tool as the wire writes it (for a tool the seams changed).
    fn tool(tool: &ToolSchema) -> Value;
}

/// A request of wire `F` read into views.
pub(super) struct RequestViews<F> {
    /// What the seams see (the headers are the gateway's to fill in).
    pub(super) request: RelayRequest,
    /// Where each message's texts live.
    pub(super) placed: Vec<Placed>,
    /// Where each tool lives.
    pub(super) tools: Vec<PlacedTool>,
    /// The response this one continues (Responses'
    /// `previous_response_id`).
    previous: Option<String>,
    wire: PhantomData<fn() -> F>,
}

/// A request being written back: the client's document (`root` parsed
/// from `src`) and its views.
pub(super) struct Document<'a, F> {
    /// The client's body.
    src: &'a [u8],
    /// Its tree.
    root: &'a Node,
    /// Its views.
    pub(super) views: &'a RequestViews<F>,
}

impl<F> Document<'_, F> {
    /// The wire's array `member` (`messages`, `input`) re-encoded to hold
    /// `messages`: each message the seams left as it was keeps its bytes,
    /// any other is written by `encode`.
    pub(super) fn kept_or_encoded(
        &self,
        member: &str,
        messages: &[Message],
        encode: fn(&Message) -> Value,
    ) -> Member {
        let wire = self
            .root
            .get(self.src, member)
            .and_then(Node::as_array)
            .unwrap_or_default();
        let before = &self.views.request.messages;
        let items: Vec<Vec<u8>> = messages
            .iter()
            .map(|message| {
                before
                    .iter()
                    .position(|old| old == message)
                    .and_then(|at| wire.get(self.views.placed[at].wire))
                    .map_or_else(
                        || encode(message).to_string().into_bytes(),
                        |node| node.raw(self.src).to_vec(),
                    )
            })
            .collect();
        (member.to_owned(), Some(crate::jsondoc::array_from(items)))
    }
}

impl<F: RequestFormat> RequestView for RequestViews<F> {
    fn read(src: &[u8], root: &Node) -> Result<Self, String> {
        let Some(members) = root.as_object() else {
            return Err("the request body is not a JSON object".to_owned());
        };
        let model = views::model_of(src, root)?;
        let (messages, placed) = F::messages(src, root)?;
        let (tools, tool_places) =
            views::tools_of(src, root, |src, tool| tool_of(src, tool, &F::TOOLS))?;
        views::check_stream(src, root)?;
        let previous = F::previous(src, root)?;
        Ok(RequestViews {
            request: RelayRequest {
                model,
                messages,
                tools: ToolList::new(tools),
                kwargs: views::kwargs_of(src, members, F::MEMBERS),
                headers: Headers::default(),
            },
            placed,
            tools: tool_places,
            previous,
            wire: PhantomData,
        })
    }

    fn request(&self) -> &RelayRequest {
        &self.request
    }

    /// The request with the seams' changes written back: while the
    /// messages keep their shape each changed text is replaced at its
    /// place, otherwise the wire re-encodes them ([`RequestFormat::reshape`]);
    /// likewise the tools' descriptions, or the tool list re-encoded.
    fn write(&self, src: &[u8], root: &Node, judged: &RelayRequest) -> Result<Vec<u8>, String> {
        let before = &self.request;
        let mut splice = Splice::new();
        let mut members = views::envelope_changes(before, judged);
        if views::all_same_shape(&before.messages, &judged.messages) {
            views::write_texts(
                &mut splice,
                &before.messages,
                &judged.messages,
                &self.placed,
            );
        } else {
            let doc = Document {
                src,
                root,
                views: self,
            };
            members.extend(F::reshape(&doc, &judged.messages));
        }
        if !views::write_tools(&mut splice, &before.tools, &judged.tools, &self.tools) {
            let array =
                views::tools_array(src, &before.tools, &judged.tools, &self.tools, |tool| {
                    F::tool(tool).to_string().into_bytes()
                });
            members.push((
                "tools".to_owned(),
                (!judged.tools.is_empty()).then_some(array),
            ));
        }
        views::write_members(src, root, splice, &members)
    }

    fn previous(&self) -> Option<&str> {
        self.previous.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Anthropic, OpenAi, Responses};
    use super::*;
    use crate::jsondoc::{parse, Limits};
    use serde_json::json;

    /// The tools a request of wire `F` with `tools` reads to, or its error.
    fn tools<F: RequestFormat>(tools: &str) -> Result<Vec<ToolSchema>, String> {
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"x"}}],"tools":{tools}}}"#
        );
        let root = parse(body.as_bytes(), &Limits::default()).expect("JSON");
        RequestViews::<F>::read(body.as_bytes(), &root).map(|read| read.request.tools.to_vec())
    }

    fn tool(name: &str, description: &str, parameters: Value) -> ToolSchema {
        ToolSchema {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    #[test]
    fn each_wire_reads_its_own_tools_and_names_the_built_in_ones() {
        assert_eq!(
            tools::<Anthropic>(
                r#"[{"name":"f","description":"d","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]"#
            ),
            Ok(vec![
                tool("f", "d", json!({"type": "object"})),
                tool(
                    "web_search",
                    "",
                    json!({"type": "web_search_20250305", "name": "web_search"})
                ),
            ])
        );
        let empty = json!({"type": "object", "properties": {}});
        assert_eq!(
            tools::<OpenAi>(
                r#"[{"type":"function","function":{"name":"f","description":null}},{"type":"custom","custom":{"name":"c"}}]"#
            ),
            Ok(vec![
                tool("f", "", empty.clone()),
                tool(
                    "custom",
                    "",
                    json!({"type": "custom", "custom": {"name": "c"}})
                ),
            ])
        );
        assert_eq!(
            tools::<Responses>(
                r#"[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"custom","name":"c","description":"d","format":{"type":"grammar"}},{"type":"custom","name":"bare"},{"name":"untyped"}]"#
            ),
            Ok(vec![
                tool("f", "", json!({"type": "object"})),
                tool("c", "d", json!({"type": "grammar"})),
                tool("bare", "", empty),
                tool("tool", "", json!({"name": "untyped"})),
            ])
        );
    }

    #[test]
    fn a_tool_that_cannot_be_read_is_named_in_the_wire_s_words() {
        type Read = fn(&str) -> Result<Vec<ToolSchema>, String>;
        let cases: [(Read, &str, &str); 4] = [
            (
                tools::<Anthropic>,
                r#"[{"name":1}]"#,
                "a tool needs a `name`",
            ),
            (
                tools::<OpenAi>,
                r#"[{"type":"function"}]"#,
                "a tool needs `function`",
            ),
            (
                tools::<OpenAi>,
                r#"[{"type":"function","function":{}}]"#,
                "a tool needs `function.name`",
            ),
            (
                tools::<Responses>,
                r#"[{"type":"custom"}]"#,
                "`name` must be a string",
            ),
        ];
        for (read, tools, line) in cases {
            assert_eq!(read(tools), Err(format!("tools[0]: {line}")), "{tools}");
        }
        let description = r#"[{"type":"function","function":{"name":"f","description":1}}]"#;
        assert_eq!(
            tools::<OpenAi>(description),
            Err("tools[0]: `function.description` must be a string".to_owned())
        );
    }
}
