//! The scripted model: a fixed list of responses, one per provider call,
//! recording every request exactly as it arrived (after all seams), the
//! headers that call carried included.
//!
//! ```json
//! {"responses": [
//!   {"content": "text", "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls"}}],
//!    "usage": {"input_tokens": 10, "output_tokens": 5}}
//! ]}
//! ```
//! Every field is optional. A call id left out becomes `call_<n>`. Running
//! out of responses is an error that says so. `"deltas": ["say forb",
//! "idden now"]` streams the text in exactly those pieces (with `--stream`);
//! the content is then their concatenation unless `content` is given too.
//! `"pace_ms": 40` waits that long before each piece after the first: a
//! stream at that pace rather than a burst.

use super::{ModelResponse, Provider, ProviderCall, ProviderError, StreamDelta, Usage};
use crate::types::{Arguments, Headers, Message, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A script that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {}: {source}", path.display())]
    Read {
        /// The script file that was asked for.
        path: PathBuf,
        /// The I/O error reading it.
        source: std::io::Error,
    },
    /// The text is not a valid script.
    #[error("malformed script{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Malformed {
        /// The script path, when read from a file.
        path: Option<PathBuf>,
        /// What is wrong, with line and column.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    responses: Vec<ScriptedResponse>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedResponse {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    deltas: Option<Vec<String>>,
    #[serde(default)]
    pace_ms: u64,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<Arguments>,
}

/// One request as the scripted model received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The model name.
    pub model: String,
    /// Messages received.
    pub messages: Vec<Message>,
    /// Tools offered.
    pub tools: Vec<ToolSchema>,
    /// Extra options received.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The headers this call carried: its own, else the model's configured
    /// ones (`None`: no header surface).
    pub headers: Option<Headers>,
}

/// A fake model that replays a script.
pub struct ScriptedModel {
    model: String,
    responses: Vec<ScriptedResponse>,
    /// The header surface (`None`: none); never changed by a call.
    headers: Option<Headers>,
    state: Mutex<State>,
}

struct State {
    next: usize,
    recorded: Vec<RecordedRequest>,
    record_file: Option<std::fs::File>,
}

impl ScriptedModel {
    /// Parses a script from JSON text.
    ///
    /// # Errors
    ///
    /// `ScriptError::Malformed`, with the line and column, when `text` is not a
    /// script.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        Self::parse(text, None)
    }

    /// Reads and parses a script file.
    ///
    /// # Errors
    ///
    /// `ScriptError::Read` when the file cannot be read;
    /// `ScriptError::Malformed` when its text is not a script.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, Some(path))
    }

    fn parse(text: &str, path: Option<&Path>) -> Result<Self, ScriptError> {
        let script: Script =
            serde_json::from_str(text).map_err(|error| ScriptError::Malformed {
                path: path.map(Path::to_owned),
                message: error.to_string(),
            })?;
        Ok(ScriptedModel {
            model: "scripted".to_owned(),
            responses: script.responses,
            headers: Some(Headers::default()),
            state: Mutex::new(State {
                next: 0,
                recorded: Vec::new(),
                record_file: None,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reports `model` as its model name (a case recorded from a real
    /// model replays under that model's name, so packs that look at it
    /// decide as they did).
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets the configured headers of its header surface.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = Some(headers);
        self
    }

    /// Removes the header surface (the envelope then carries no headers,
    /// and headers a call carries are ignored).
    #[must_use]
    pub fn without_header_surface(mut self) -> Self {
        self.headers = None;
        self
    }

    /// Also appends each request to `path`, one JSON object per line.
    ///
    /// # Errors
    ///
    /// The I/O error when `path` cannot be opened for appending (or created).
    pub fn record_to(self, path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        self.state().record_file = Some(file);
        Ok(self)
    }

    /// Every request received so far.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.state().recorded.clone()
    }

    /// Responses not yet used.
    pub fn remaining(&self) -> usize {
        self.responses.len().saturating_sub(self.state().next)
    }
}

impl Provider for ScriptedModel {
    fn model(&self) -> &str {
        &self.model
    }

    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        self.answer(call).map(|(response, _, _)| response)
    }

    fn stream(
        &self,
        call: &ProviderCall<'_>,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        let (response, text, pace) = self.streamed(call)?;
        let mut first = true;
        let mut paced = |delta: StreamDelta| {
            if matches!(delta, StreamDelta::Text(_)) && !std::mem::take(&mut first) {
                std::thread::sleep(pace);
            }
            on_delta(delta);
        };
        super::replay(response, text, &mut paced);
        Ok(())
    }

    fn stream_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
        on_delta: super::DeltaSink<'a>,
    ) -> super::ProviderFuture<'a, ()> {
        Box::pin(async move {
            let (response, text, pace) = self.streamed(call)?;
            for (i, piece) in text.into_iter().enumerate() {
                if i > 0 && !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
                on_delta(StreamDelta::Text(piece));
            }
            super::replay(response, Vec::new(), on_delta);
            Ok(())
        })
    }

    fn request_headers(&self) -> Option<Headers> {
        self.headers.clone()
    }
}

impl ScriptedModel {
    /// [`answer`](Self::answer) for streaming: the response, its text in
    /// the pieces to stream (taken out of it), and the pause before each
    /// piece after the first (`pace_ms`: a stream at that pace).
    fn streamed(
        &self,
        call: &ProviderCall<'_>,
    ) -> Result<(ModelResponse, Vec<String>, std::time::Duration), ProviderError> {
        let (mut response, deltas, pace) = self.answer(call)?;
        let text = match deltas {
            Some(deltas) => deltas,
            None if response.content.is_empty() => Vec::new(),
            None => vec![std::mem::take(&mut response.content)],
        };
        Ok((response, text, std::time::Duration::from_millis(pace)))
    }

    /// Records the call and takes the next response, with its scripted
    /// deltas when it has any, and their pace.
    fn answer(
        &self,
        call: &ProviderCall<'_>,
    ) -> Result<(ModelResponse, Option<Vec<String>>, u64), ProviderError> {
        let request = RecordedRequest {
            model: call.model.unwrap_or(&self.model).to_owned(),
            messages: call.messages.to_vec(),
            tools: call.tools.to_vec(),
            kwargs: call.kwargs.clone(),
            headers: self
                .headers
                .as_ref()
                .map(|own| call.headers_or(own).clone()),
        };
        let mut state = self.state();
        if let Some(file) = state.record_file.as_mut() {
            let line =
                serde_json::to_string(&request).map_err(|e| ProviderError::msg(e.to_string()))?;
            writeln!(file, "{line}")
                .map_err(|e| ProviderError::msg(format!("cannot record the request: {e}")))?;
        }
        state.recorded.push(request);
        let index = state.next;
        let Some(response) = self.responses.get(index) else {
            return Err(ProviderError::msg(format!(
                "the script ran out: all {} responses were used and the model was called again",
                self.responses.len()
            )));
        };
        state.next += 1;
        let tool_calls = response
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}_{}", index + 1, i + 1)),
                name: c.name.clone(),
                arguments: c.arguments.clone().unwrap_or_default(),
            })
            .collect();
        let content = match (&response.content, &response.deltas) {
            (Some(content), _) => content.clone(),
            (None, Some(deltas)) => deltas.concat(),
            (None, None) => String::new(),
        };
        Ok((
            ModelResponse {
                content,
                tool_calls,
                usage: response.usage.unwrap_or_default(),
            },
            response.deltas.clone(),
            response.pace_ms,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(
        messages: &'a [Message],
        kwargs: &'a serde_json::Map<String, serde_json::Value>,
    ) -> ProviderCall<'a> {
        ProviderCall {
            model: None,
            messages,
            tools: &[],
            kwargs,
            headers: None,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        Headers(
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn each_request_is_recorded_with_the_headers_its_call_carried_and_the_model_keeps_its_own() {
        let model = ScriptedModel::from_json(r#"{"responses": [{}, {}]}"#)
            .unwrap()
            .with_headers(headers(&[("X-Trace", "configured")]));
        let kwargs = serde_json::Map::new();
        let messages = [Message::user("go")];
        let own = headers(&[("X-Trace", "this call only")]);
        let carrying = ProviderCall {
            model: None,
            headers: Some(&own),
            ..call(&messages, &kwargs)
        };
        model.complete(&carrying).unwrap();
        model.complete(&call(&messages, &kwargs)).unwrap();
        let recorded: Vec<_> = model.recorded().into_iter().map(|r| r.headers).collect();
        assert_eq!(
            recorded,
            [Some(own), Some(headers(&[("X-Trace", "configured")]))]
        );
        assert_eq!(
            model.request_headers(),
            Some(headers(&[("X-Trace", "configured")]))
        );
    }

    #[test]
    fn without_a_header_surface_the_headers_a_call_carries_are_ignored() {
        let model = ScriptedModel::from_json(r#"{"responses": [{}]}"#)
            .unwrap()
            .without_header_surface();
        let kwargs = serde_json::Map::new();
        let messages = [Message::user("go")];
        let own = headers(&[("X-Trace", "dropped")]);
        model
            .complete(&ProviderCall {
                model: None,
                headers: Some(&own),
                ..call(&messages, &kwargs)
            })
            .unwrap();
        assert_eq!(model.recorded()[0].headers, None);
        assert_eq!(model.request_headers(), None);
    }

    #[test]
    fn responses_are_consumed_in_order_and_running_out_says_so() {
        let model = ScriptedModel::from_json(
            r#"{"responses": [{"tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}]}, {"content": "done"}]}"#,
        )
        .unwrap();
        let kwargs = serde_json::Map::new();
        let messages = [Message::user("go")];
        let first = model.complete(&call(&messages, &kwargs)).unwrap();
        assert_eq!(first.tool_calls[0].id, "call_1_1");
        assert_eq!(
            first.tool_calls[0].arguments.as_str(),
            r#"{"message": "hi"}"#
        );
        assert_eq!(
            model.complete(&call(&messages, &kwargs)).unwrap().content,
            "done"
        );
        let error = model.complete(&call(&messages, &kwargs)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the script ran out: all 2 responses"),
            "{error}"
        );
        assert_eq!(model.recorded().len(), 3);
    }

    #[test]
    fn a_malformed_script_is_one_line_with_its_position() {
        for text in [
            r#"{"responses": [{"content": 3}]}"#,
            "{",
            r#"{"responses": [{"tool_calls": [{}]}]}"#,
            r#"{"respones": []}"#,
        ] {
            let error = ScriptedModel::from_json(text).err().unwrap().to_string();
            assert!(error.starts_with("malformed script: "), "{error}");
            assert!(error.contains("line 1"), "{error}");
            assert!(!error.contains('\n'));
        }
    }
}
