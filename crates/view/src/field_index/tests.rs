use super::*;
use proptest::prelude::*;

/// Values of every JSON kind a field may hold (and texts that are not JSON).
fn value_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0i64..20).prop_map(|n| format!(r#"{{"f":{n}}}"#)),
        (0i64..20).prop_map(|n| format!(r#"{{"f":{n}.5}}"#)),
        "[a-c]{0,3}".prop_map(|s| format!(r#"{{"f":"{s}"}}"#)),
        "[0-9]{1,2}".prop_map(|s| format!(r#"{{"f":"{s}"}}"#)),
        Just(r#"{"f":true}"#.to_string()),
        Just(r#"{"f":false}"#.to_string()),
        Just(r#"{"f":null}"#.to_string()),
        Just(r#"{"f":[1,"a"]}"#.to_string()),
        Just(r#"{"f":{"a":1}}"#.to_string()),
        Just(r#"{"g":1}"#.to_string()),
        Just("not json".to_string()),
    ]
}

fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        (0i64..20).prop_map(|n| n.to_string()),
        (0i64..20).prop_map(|n| format!("{n}.5")),
        "[a-c]{0,3}",
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
        Just("1".to_string()),
        Just("%5B1".to_string()),
        // Patterns (with = and != only; other operators refuse them).
        "[a-c]{0,2}".prop_map(|s| format!("{s}%*")),
        "[a-c0-9]{0,2}".prop_map(|s| format!("%?{s}")),
        Just("%re:^[ab1]".to_string()),
        Just("%re:5$".to_string()),
    ]
}

proptest! {
    /// Every record a condition holds for is a candidate of the index (so an indexed answer is
    /// the scan's), and every candidate but the objects and arrays satisfies it (the index
    /// prunes as much as the dictionary allows).
    #[test]
    fn field_index_candidates_agree_with_the_record_path(
        values in proptest::collection::vec(value_text(), 1..40),
        op in prop_oneof![Just("="), Just("!="), Just("<"), Just("<="), Just(">"), Just(">="), Just("~"), Just("!~")],
        lit in literal(),
    ) {
        let Ok(filter) = Filter::parse(&format!("f{op}{lit}")) else {
            prop_assert!(lit.contains("%*") || lit.contains("%?") || lit.starts_with("%re:"));
            return Ok(());
        };
        let c = &filter.conditions().unwrap()[0];
        let path = vec!["f".to_string()];
        let mut b = FieldIndexBuilder::new(b"f", Offset(10));
        let mut found = Vec::new();
        for (i, text) in values.iter().enumerate() {
            let offset = Offset(10 + i as i64);
            let v = crate::filter::extract::field(text.as_bytes(), &path).ok().flatten();
            match &v {
                Some(v) => add_value(&mut b, offset, v),
                None => b.skip(offset),
            }
            found.push(v);
        }
        let index = FieldIndex::decode(&b.finish(Offset(10 + values.len() as i64))).unwrap();
        let cands = candidates(c, &index);
        for (i, v) in found.iter().enumerate() {
            let holds = v.as_ref().is_some_and(|v| c.holds_for_json(v));
            let candidate = cands.binary_search(&(i as u32)).is_ok();
            if holds {
                prop_assert!(candidate, "{} holds for {:?} but is no candidate", filter_text(op, &lit), v);
            }
            let composite = matches!(v, Some(Value::Array(_) | Value::Object(_)));
            if candidate && !composite {
                prop_assert!(holds, "{} does not hold for candidate {:?}", filter_text(op, &lit), v);
            }
        }
    }

    /// Header values: the same agreement through the byte comparison.
    #[test]
    fn field_index_header_candidates_agree_with_the_record_path(
        values in proptest::collection::vec(proptest::option::of("[a-c0-9]{0,2}"), 1..30),
        op in prop_oneof![Just("="), Just("!="), Just("<"), Just(">="), Just("~"), Just("!~")],
        lit in literal(),
    ) {
        let Ok(filter) = Filter::parse(&format!("@header.h{op}{lit}")) else {
            prop_assert!(lit.contains("%*") || lit.contains("%?") || lit.starts_with("%re:"));
            return Ok(());
        };
        let c = &filter.conditions().unwrap()[0];
        let mut b = FieldIndexBuilder::new(b"@header.h", Offset(0));
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) => b.add(Offset(i as i64), ValueKind::String, v.as_bytes()),
                None => b.add(Offset(i as i64), ValueKind::Null, &[]),
            }
        }
        let index = FieldIndex::decode(&b.finish(Offset(values.len() as i64))).unwrap();
        let cands = candidates(c, &index);
        for (i, v) in values.iter().enumerate() {
            let holds = c.holds_for_bytes(v.as_deref().map(str::as_bytes));
            prop_assert_eq!(holds, cands.binary_search(&(i as u32)).is_ok(), "{:?}", v);
        }
    }
}

fn filter_text(op: &str, lit: &str) -> String {
    format!("f{op}{lit}")
}

#[test]
fn a_field_text_is_a_json_field_or_a_header() {
    assert!(FieldIndexes::parse_field("user").is_ok());
    assert!(FieldIndexes::parse_field("address.city").is_ok());
    assert!(FieldIndexes::parse_field("@header.trace").is_ok());
    for bad in ["@key", "@value", "", "a,b", "a=b"] {
        assert!(FieldIndexes::parse_field(bad).is_err(), "{bad}");
    }
    let field = FieldIndexes::parse_field("a%2Eb.c").unwrap();
    assert_eq!(field_text(&field).as_deref(), Some("a%2Eb.c"));
}
