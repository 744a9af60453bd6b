//! The JSON document parser of the gateway: never panics; whatever it
//! accepts with nesting under `serde_json`'s 128 and numbers out of range
//! refused, `serde_json` accepts too and reads the same value, in every
//! node; whatever `serde_json` accepts and it refuses has a duplicate key;
//! every error is one line. Keeping lone surrogates, or numbers out of
//! range (the default), accepts more, for that reason only.
#![no_main]

use chimera_host::jsondoc::{parse, Kind, Limits, Node, Numbers, ParseErrorKind, Surrogates};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Every node's raw bytes read (with `serde_json`) as its `to_value`.
fn check_nodes(src: &[u8], node: &Node) {
    let read: Value = serde_json::from_slice(node.raw(src)).expect("a node's bytes parse");
    assert_eq!(read, node.to_value(src));
    match &node.kind {
        Kind::Array(items) => items.iter().for_each(|item| check_nodes(src, item)),
        Kind::Object(members) => {
            for (key, value) in members {
                let text: String = serde_json::from_slice(&src[key.span.clone()]).expect("a key");
                assert_eq!(key.text(src), text);
                check_nodes(src, value);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let agreeing = Limits::default()
        .with_max_depth(127)
        .with_numbers(Numbers::InRange);
    let ours = parse(data, &agreeing);
    match (&ours, serde_json::from_slice::<Value>(data)) {
        (Ok(root), Ok(value)) => {
            assert_eq!(root.to_value(data), value);
            check_nodes(data, root);
        }
        (Ok(_), Err(error)) => panic!("accepted, serde_json refuses: {error}"),
        (Err(error), Ok(_)) => assert!(
            matches!(error.kind(), ParseErrorKind::DuplicateKey { .. }),
            "refused ({error}), serde_json accepts"
        ),
        (Err(_), Err(_)) => {}
    }
    if let Err(error) = &ours {
        assert!(!error.to_string().contains('\n'), "{error}");
        assert!(error.offset() <= data.len());
    }
    let relaxed = [
        agreeing.with_surrogates(Surrogates::Keep),
        agreeing.with_numbers(Numbers::Keep),
    ];
    for (rule, limits) in relaxed.iter().enumerate() {
        match (&ours, &parse(data, limits)) {
            (Ok(strict), Ok(kept)) => assert_eq!(strict, kept),
            (Ok(_), Err(error)) => panic!("relaxed {rule} refuses: {error}"),
            (Err(error), Ok(kept)) => {
                let explained = match rule {
                    0 => matches!(error.kind(), ParseErrorKind::LoneSurrogate { .. }),
                    _ => *error.kind() == ParseErrorKind::NumberOutOfRange,
                };
                assert!(explained, "{error}, relaxed {rule} accepts");
                let _ = kept.to_value(data);
            }
            (Err(_), Err(_)) => {}
        }
    }
});
