//! Round trips through the wire: values, inputs and messages encoded,
//! framed and decoded again, and hostile or truncated frames refused.
//! One module for them, since each round trip crosses the others.

use super::frame::*;
use super::input::*;
use super::message::*;
use super::WIRE_VERSION;
use abi_stable::std_types::{ROption, RVec};
use chimera_plugin_api::abi::{
    BlockValue, Decision, HeaderValue, MessageValue, RequestValue, Seam, SeamValue, ToolCallValue,
    ToolResultValue,
};

// ── values ──
/// A message with one block and one tool call.
fn message(role: &str, content: &str) -> MessageValue {
    MessageValue {
        role: role.into(),
        content: content.into(),
        blocks: RVec::from(vec![BlockValue {
            kind: "text".into(),
            text: "b".into(),
            data_json: "{}".into(),
        }]),
        tool_calls: RVec::from(vec![ToolCallValue {
            id: "c1".into(),
            name: "bash".into(),
            arguments_json: "{\"cmd\":\"ls\"}".into(),
        }]),
        tool_call_id: "t".into(),
        name: "n".into(),
    }
}

/// One decision of each kind, and a replacement with every slot.
fn decisions() -> Vec<Decision> {
    vec![
        Decision::allow(),
        Decision::block("no ✗"),
        Decision::error("broke"),
        Decision::hold(12),
        Decision::allow().with_notice("heads up"),
        Decision::retry("again", 2, Some("enough")),
        Decision::ask("ok?", &["allow", "reject"], Some(5), "reject"),
        Decision::replace(SeamValue {
            messages: ROption::RSome(RVec::from(vec![message("user", "x")])),
            request: ROption::RSome(RequestValue {
                model: "m".into(),
                tools_json: "[]".into(),
                kwargs_json: "{}".into(),
                headers: ROption::RNone,
            }),
            tool_call: ROption::RSome(ToolCallValue::default()),
            tool_result: ROption::RSome(ToolResultValue {
                output: "o".into(),
                error: ROption::RNone,
                metadata_json: "{}".into(),
            }),
            text: ROption::RSome("t".into()),
            extension_json: ROption::RNone,
        })
        .with_notice("redacted"),
    ]
}

#[test]
fn a_reply_round_trips_every_decision_with_its_value_and_notice() {
    let mut buf = Vec::new();
    for decision in decisions() {
        let frame = reply(&mut buf, 9, 2, Some(&decision)).to_vec();
        let FromChild::Reply {
            seq,
            allowed,
            decision: Some(back),
        } = decode_from_child(&frame[4..]).unwrap()
        else {
            panic!("a reply");
        };
        assert_eq!((seq, allowed), (9, 2));
        assert_eq!(format!("{decision:?}"), format!("{back:?}"));
        assert_eq!(decision.notice(), back.notice());
    }
    let frame = reply(&mut buf, 1, 3, None).to_vec();
    assert!(matches!(
        decode_from_child(&frame[4..]).unwrap(),
        FromChild::Reply {
            seq: 1,
            allowed: 3,
            decision: None
        }
    ));
}

// ── inputs ──
/// An input with every slot filled.
fn full_input() -> OwnedInput {
    OwnedInput {
        session_id: "s1".to_owned(),
        counters: [1, 2, 3, 4, 5],
        session_extension: "{\"x\":1}".to_owned(),
        messages: vec![message("user", "hi ✓"), message("assistant", "")],
        request: Some(RequestValue {
            model: "m".into(),
            tools_json: "[]".into(),
            kwargs_json: "{}".into(),
            headers: ROption::RSome(RVec::from(vec![HeaderValue {
                name: "k".into(),
                value: "v".into(),
            }])),
        }),
        tool_call: Some(ToolCallValue {
            id: "c".into(),
            name: "write_file".into(),
            arguments_json: "{}".into(),
        }),
        tool_result: Some(ToolResultValue {
            output: "out".into(),
            error: ROption::RSome("err".into()),
            metadata_json: "{}".into(),
        }),
        text: "text".to_owned(),
        extension_json: "{\"released\":0}".to_owned(),
    }
}

/// Encodes `input` as a call on `seam`, decodes it, and returns what
/// the child would see.
fn through_the_wire(input: &OwnedInput, seam: Seam) -> (u64, u32, Vec<u32>, OwnedInput) {
    let mut buf = Vec::new();
    let frame = input.with_view(seam, |view| call(&mut buf, 7, &[0, 2], view).to_vec());
    assert_eq!(
        u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize,
        frame.len() - 4
    );
    match decode_from_host(&frame[4..]).unwrap() {
        FromHost::Call {
            seq,
            seam,
            indices,
            input,
        } => (seq, seam, indices, *input),
        other => panic!("{other:?}"),
    }
}

fn same(a: &OwnedInput, b: &OwnedInput) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn a_call_round_trips_every_field_of_its_input() {
    let input = full_input();
    let (seq, seam, indices, back) = through_the_wire(&input, Seam::TOOL_RESULT);
    assert_eq!((seq, seam, indices), (7, 3, vec![0, 2]));
    assert!(same(&input, &back), "{input:?}\n{back:?}");
}

#[test]
fn each_seam_sends_only_the_slots_it_fills() {
    let full = full_input();
    let only = |f: &dyn Fn(&mut OwnedInput)| {
        let mut input = OwnedInput {
            session_id: full.session_id.clone(),
            counters: full.counters,
            session_extension: full.session_extension.clone(),
            ..OwnedInput::default()
        };
        f(&mut input);
        input
    };
    let cases: Vec<(Seam, OwnedInput)> = vec![
        (
            Seam::CONTEXT,
            only(&|i| i.messages.clone_from(&full.messages)),
        ),
        (
            Seam::PROVIDER_REQUEST,
            only(&|i| {
                i.messages.clone_from(&full.messages);
                i.request.clone_from(&full.request);
            }),
        ),
        (
            Seam::TOOL_CALL,
            only(&|i| i.tool_call.clone_from(&full.tool_call)),
        ),
        (
            Seam::TOOL_RESULT,
            only(&|i| {
                i.tool_call.clone_from(&full.tool_call);
                i.tool_result.clone_from(&full.tool_result);
            }),
        ),
        (
            Seam::MODEL_RESPONSE,
            only(&|i| {
                i.messages.clone_from(&full.messages);
                i.text.clone_from(&full.text);
                i.extension_json = "{\"streamed\":false}".to_owned();
            }),
        ),
        (Seam::OUTPUT, only(&|i| i.text.clone_from(&full.text))),
        (
            Seam::STREAM_CHUNK,
            only(&|i| {
                i.text.clone_from(&full.text);
                i.extension_json.clone_from(&full.extension_json);
            }),
        ),
    ];
    for (seam, input) in cases {
        let (_, got_seam, _, back) = through_the_wire(&input, seam);
        assert_eq!(got_seam, seam.0);
        assert!(same(&input, &back), "{seam}: {input:?}\n{back:?}");
    }
    // A tool_call input is small: no messages, no request travel.
    let mut buf = Vec::new();
    let small = only(&|i| i.tool_call.clone_from(&full.tool_call));
    let len = small.with_view(Seam::TOOL_CALL, |v| call(&mut buf, 1, &[0], v).len());
    assert!(len < 120, "{len} bytes");
}

// ── messages ──
#[test]
fn hello_state_and_import_frames_round_trip() {
    let sent = Hello {
        wire_version: WIRE_VERSION,
        name: "fixture".to_owned(),
        version: "0.1.0".to_owned(),
        description: "d".to_owned(),
        registrations: vec![(2, "tool_call".to_owned()), (6, "gate".to_owned())],
        policy_json: "{\"fail_closed\":[]}".to_owned(),
        warnings: vec!["no landlock".to_owned()],
    };
    let mut buf = Vec::new();
    let frame = hello(&mut buf, &sent).to_vec();
    let FromChild::Hello(back) = decode_from_child(&frame[4..]).unwrap() else {
        panic!("a hello");
    };
    assert_eq!(back, sent);
    // Each frame, and the message it decodes to (compared as printed).
    let from_child = [
        (
            state(&mut buf, 4, "{\"n\":1}").to_vec(),
            FromChild::State {
                seq: 4,
                json: "{\"n\":1}".to_owned(),
            },
        ),
        (
            imported(&mut buf, 5, Err("bad")).to_vec(),
            FromChild::Imported {
                seq: 5,
                outcome: Err("bad".to_owned()),
            },
        ),
    ];
    for (frame, expected) in from_child {
        let back = decode_from_child(&frame[4..]).unwrap();
        assert_eq!(format!("{back:?}"), format!("{expected:?}"));
    }
    let from_host = [
        (
            import(&mut buf, 6, "{}").to_vec(),
            FromHost::Import {
                seq: 6,
                json: "{}".to_owned(),
            },
        ),
        (export(&mut buf, 8).to_vec(), FromHost::Export { seq: 8 }),
        (shutdown(&mut buf).to_vec(), FromHost::Shutdown),
    ];
    for (frame, expected) in from_host {
        let back = decode_from_host(&frame[4..]).unwrap();
        assert_eq!(format!("{back:?}"), format!("{expected:?}"));
    }
}

#[test]
fn every_truncation_of_a_frame_is_an_error_not_a_panic() {
    let mut buf = Vec::new();
    let input = full_input();
    let call_frame = input.with_view(Seam::PROVIDER_REQUEST, |v| {
        call(&mut buf, 1, &[0], v).to_vec()
    });
    for cut in 0..call_frame.len() - 4 {
        assert!(decode_from_host(&call_frame[4..4 + cut]).is_err(), "{cut}");
    }
    for decision in decisions() {
        let frame = reply(&mut buf, 1, 0, Some(&decision)).to_vec();
        for cut in 0..frame.len() - 4 {
            assert!(decode_from_child(&frame[4..4 + cut]).is_err());
        }
    }
}

#[test]
fn hostile_frames_are_refused_with_an_error() {
    // Unknown kinds, on either side.
    assert_eq!(decode_from_child(&[200]).unwrap_err(), WireError::Kind(200));
    assert_eq!(decode_from_host(&[0]).unwrap_err(), WireError::Kind(0));
    // A frame for the other direction is an unknown kind here.
    assert!(decode_from_child(&[kind::CALL, 0]).is_err());
    // Bad UTF-8 in a string.
    let mut frame = vec![kind::FAILED];
    frame.extend_from_slice(&2u32.to_le_bytes());
    frame.extend_from_slice(&[0xff, 0xfe]);
    assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Utf8);
    // A string length far beyond the frame.
    let mut frame = vec![kind::FAILED];
    frame.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Truncated);
    // A huge element count allocates nothing: refused up front.
    let mut frame = vec![kind::REPLY];
    frame.extend_from_slice(&1u64.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.push(1); // a decision
    frame.extend_from_slice(&1u32.to_le_bytes()); // REPLACE
    frame.extend_from_slice(&0u32.to_le_bytes()); // reason ""
    frame.push(1); // a value
    frame.push(1); // messages
    frame.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Truncated);
    // A presence flag that is neither 0 nor 1.
    let mut frame = vec![kind::IMPORTED];
    frame.extend_from_slice(&1u64.to_le_bytes());
    frame.push(7);
    assert!(matches!(
        decode_from_child(&frame).unwrap_err(),
        WireError::Malformed(_)
    ));
    // Trailing bytes.
    let mut buf = Vec::new();
    let mut frame = reply(&mut buf, 1, 0, None)[4..].to_vec();
    frame.push(0);
    assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Trailing);
    // An empty frame.
    assert!(decode_from_child(&[]).is_err());
}

#[test]
fn state_operations_and_their_answers_round_trip_and_a_bad_one_is_refused() {
    let mut buf = Vec::new();
    let op = |scope: u8, conversation: &str, key: &str, kind| StateOp {
        scope,
        conversation: conversation.to_owned(),
        key: key.to_owned(),
        kind,
    };
    let ops = [
        op(
            1,
            "key-ab/chat",
            "calls",
            StateKind::Incr {
                n: -3,
                window_ms: 60_000,
            },
        ),
        op(0, "", "spent", StateKind::Get { window_ms: 0 }),
        op(
            1,
            "c",
            "spent",
            StateKind::Add {
                n: 60,
                window_ms: 86_400_000,
            },
        ),
        op(
            0,
            "",
            "requests",
            StateKind::Take {
                n: 1,
                rate: 0.25,
                burst: 4,
            },
        ),
    ];
    for op in ops {
        let frame = state_op(&mut buf, 9, &op).to_vec();
        let FromChild::StateOp { seq, op: back } = decode_from_child(&frame[4..]).unwrap() else {
            panic!("a state operation");
        };
        assert_eq!((seq, back), (9, op));
        for cut in 0..frame.len() - 4 {
            assert!(decode_from_child(&frame[4..4 + cut]).is_err(), "{cut}");
        }
    }
    for answer in [
        StateAnswer::Total(-7),
        StateAnswer::Added,
        StateAnswer::Taken {
            allowed: false,
            wait_ms: 250,
            remaining: 0,
        },
        StateAnswer::Refused("the state store is unavailable: down".to_owned()),
    ] {
        let frame = state_answer(&mut buf, &answer).to_vec();
        let FromHost::StateAnswer(back) = decode_from_host(&frame[4..]).unwrap() else {
            panic!("a state answer");
        };
        assert_eq!(back, answer);
    }
    // An operation this host does not know is refused, not guessed at.
    let get = op(0, "", "k", StateKind::Get { window_ms: 0 });
    let mut frame = state_op(&mut buf, 1, &get)[4..].to_vec();
    frame[1 + 8] = 9;
    assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Kind(9));
}
