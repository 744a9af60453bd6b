//! The `provider_request` seam: right after `context`, before the wire. Sees
//! the envelope {model, messages, tools, kwargs, headers}; the final
//! envelope's messages, tools and kwargs are what is sent. Replaced headers
//! travel with that call only; the provider's own never change. A block means no
//! provider call and the run ends. Fail-open.

use super::edit::{Edit, Field};
use super::views::{messages_from_abi, with_message_views};
use super::{empty_input, Decided, Invalid, ProviderRequestSeam, SeamAbi, SeamShape};
use crate::types::{Headers, ProviderRequest, ToolList, ToolSchema};
use abi_stable::std_types::{ROption, RSlice, RStr, RVec};
use chimera_plugin_api::abi::{
    HeaderValue, HeaderView, RequestView, SeamInput, SeamValue, SessionView,
};

impl SeamAbi for ProviderRequestSeam {
    fn with_input<R>(
        _lead: &(),
        value: &ProviderRequest,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let kwargs_json = if value.kwargs.is_empty() {
            "{}".to_owned()
        } else {
            serde_json::to_string(&value.kwargs).unwrap_or_else(|_| "{}".to_owned())
        };
        let headers: Option<Vec<HeaderView<'_>>> = value.headers.as_ref().map(|headers| {
            headers
                .iter()
                .map(|(name, value)| HeaderView {
                    name: RStr::from_str(name),
                    value: RStr::from_str(value),
                })
                .collect()
        });
        let request = RequestView {
            model: RStr::from_str(&value.model),
            tools_json: RStr::from_str(value.tools.json()),
            kwargs_json: RStr::from_str(&kwargs_json),
            headers: headers.as_deref().map(RSlice::from_slice).into(),
        };
        with_message_views(&value.messages, |messages| {
            f(&SeamInput {
                messages,
                request: ROption::RSome(&request),
                ..empty_input(Self::SEAM, session)
            })
        })
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        current: &ProviderRequest,
    ) -> Result<ProviderRequest, Invalid> {
        if let Some(edit) = Edit::of(&value)? {
            return apply_edit(&edit, value, current);
        }
        Decided::from_replacement(value, current)
    }
}

impl Decided for ProviderRequest {
    fn from_replacement(
        value: SeamValue,
        current: &ProviderRequest,
    ) -> Result<ProviderRequest, Invalid> {
        let described = super::describe(&value);
        let (Some(request), Some(messages)) = (
            value.request.into_option(),
            messages_from_abi(value.messages),
        ) else {
            return Err(Invalid::WrongType(described));
        };
        let messages = messages.map_err(Invalid::Malformed)?;
        // The schemas are usually handed back unchanged: then keep the list
        // (and its rendering) instead of parsing it again.
        let tools = if request.tools_json.as_str() == current.tools.json() {
            current.tools.clone()
        } else {
            let schemas: Vec<ToolSchema> = serde_json::from_str(request.tools_json.as_str())
                .map_err(|error| {
                    Invalid::Malformed(format!("tools are not a tool list: {error}"))
                })?;
            ToolList::new(schemas)
        };
        let Ok(serde_json::Value::Object(kwargs)) =
            serde_json::from_str(request.kwargs_json.as_str())
        else {
            return Err(Invalid::Malformed(
                "kwargs are not a JSON object".to_owned(),
            ));
        };
        let headers = request.headers.into_option().map(headers_from_abi);
        Ok(ProviderRequest {
            model: request.model.into_string(),
            messages,
            tools,
            kwargs,
            headers,
        })
    }

    fn changes(before: &ProviderRequest, after: &ProviderRequest) -> crate::interception::Changes {
        crate::interception::Differ::of(|d| d.request(before, after))
    }
}

/// `current` with an edit's messages (and headers, when it sets them).
fn apply_edit(
    edit: &Edit,
    value: SeamValue,
    current: &ProviderRequest,
) -> Result<ProviderRequest, Invalid> {
    let messages = edit.apply(&current.messages, value.messages.into_option())?;
    let headers = if edit.sets(Field::Headers) {
        value
            .request
            .into_option()
            .and_then(|request| request.headers.into_option())
            .map(headers_from_abi)
    } else {
        current.headers.clone()
    };
    Ok(ProviderRequest {
        model: current.model.clone(),
        messages,
        tools: current.tools.clone(),
        kwargs: current.kwargs.clone(),
        headers,
    })
}

fn headers_from_abi(headers: RVec<HeaderValue>) -> Headers {
    Headers(
        headers
            .into_iter()
            .map(|h| (h.name.into_string(), h.value.into_string()))
            .collect(),
    )
}
