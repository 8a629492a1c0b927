use super::*;
use proptest::prelude::*;
use topicfs_format::{Header, Offset};

fn record<'a>(
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Vec<Header<'a>>,
) -> Record<'a> {
    Record { offset: Offset(0), timestamp: 0, key, value, headers, sequence: -1 }
}

/// Whether `filter` keeps a record whose value is `value`, JSON read from the value.
fn keeps(filter: &str, value: &str) -> bool {
    let f = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
    let r = record(None, Some(value.as_bytes()), Vec::new());
    let got = f.matches(&r, r.value);
    assert_eq!(got, f.without_prefilter().matches(&r, r.value), "prefilter of {filter} on {value}");
    got
}

const ORDER: &str = r#"{"id":42,"user":"user-4242","item":"pen","qty":3,"price":2.5,"paid":true,
"note":null,"address":{"city":"Oslo","zip":"0150"},"items":[{"sku":"a-1"},{"sku":"b-2"}],
"big":18446744073709551615,"neg":-7}"#;

#[test]
fn each_operator_on_each_kind_of_json_field() {
    let cases: &[(&str, bool)] = &[
        ("user=user-4242", true),
        ("user=user-424", false),
        ("user!=user-1", true),
        ("user!=user-4242", false),
        ("user~4242", true),
        ("user~user-9", false),
        ("user>user-4", true),
        ("user<user-5", true),
        ("qty=3", true),
        ("qty=3.0", true),
        ("qty>2", true),
        ("qty>=3", true),
        ("qty<3", false),
        ("qty<=2.5", false),
        ("price>2.4", true),
        ("price=2.5", true),
        ("id=42", true),
        ("id!=43", true),
        ("big=18446744073709551615", true),
        ("big>18446744073709551614", true),
        ("neg<-6", true),
        ("neg=-7", true),
        ("paid=true", true),
        ("paid=false", false),
        ("paid!=false", true),
        ("paid>true", false),
        ("note=null", true),
        ("note!=null", false),
        ("address.city=Oslo", true),
        ("address.city~sl", true),
        ("address.zip=0150", true),
        ("address.zip<02", true),
        ("items.0.sku=a-1", true),
        ("items.1.sku=a-1", false),
        ("items.2.sku=a-1", false),
        ("items~b-2", true),
        ("address~Oslo", true),
        ("missing=1", false),
        ("missing!=1", false),
        ("user.first=x", false),
        ("qty~3", true),
        ("user=user-4242,qty=3", true),
        ("user=user-4242,qty=4", false),
        ("qty=abc", false),
        ("qty!=abc", true),
    ];
    for (filter, want) in cases {
        assert_eq!(keeps(filter, ORDER), *want, "{filter}");
    }
}

#[test]
fn a_value_that_is_not_json_matches_no_condition_on_a_field_but_bytes_conditions_apply() {
    for value in ["not json", "{\"user\":", "", "user=alice"] {
        assert!(!keeps("user=alice", value), "{value}");
        assert!(!keeps("user!=alice", value), "{value}");
    }
    assert!(keeps("@value~json", "not json"));
    assert!(keeps("@value=not json", "not json"));
    assert!(!keeps("@value!=not json", "not json"));
    // A JSON value that is not an object: only the whole-value conditions.
    assert!(!keeps("user=1", "[1,2]"));
    assert!(keeps("0=1", "[1,2]"), "a digit path indexes an array");
}

#[test]
fn escapes_in_the_value_skip_the_byte_check_and_still_match() {
    // "user" spelled with an escape: no "user" bytes, still the field.
    assert!(keeps("user=alice", r#"{"\u0075ser":"alice"}"#));
    assert!(keeps("user=al\"ice", r#"{"user":"al\"ice"}"#));
    assert!(keeps("user~ice", r#"{"user":"al\u0069ce"}"#));
}

#[test]
fn key_value_and_headers_compare_bytes_and_nulls_equal_only_null() {
    let headers = vec![
        Header { key: b"trace", value: Some(b"abc") },
        Header { key: b"trace", value: Some(b"def") },
        Header { key: b"n", value: Some(b"10") },
        Header { key: b"empty", value: None },
    ];
    let r = record(Some(b"k-1"), None, headers);
    let check = |filter: &str| Filter::parse(filter).unwrap().matches(&r, r.value);
    assert!(check("@key=k-1"));
    assert!(check("@key~-1"));
    assert!(!check("@key=k-2"));
    assert!(check("@value=null"), "a tombstone's value is null");
    assert!(!check("@value~x"));
    assert!(!check("@value!=null"));
    assert!(check("@header.trace=def"), "any header of that name");
    assert!(check("@header.trace!=abc"));
    assert!(!check("@header.missing!=abc"), "no such header: no condition holds");
    assert!(check("@header.n>9"), "numbers order as numbers");
    assert!(!check("@header.n=10.0"), "= compares bytes");
    assert!(check("@header.empty=null"));
    assert!(!check("user=x"), "no JSON in a tombstone");
    let unkeyed = record(None, Some(b"{}"), Vec::new());
    assert!(Filter::parse("@key=null").unwrap().matches(&unkeyed, unkeyed.value));
}

#[test]
fn schema_decoded_json_is_what_fields_read() {
    let r = record(None, Some(b"\x00\x00\x00\x00\x01binary"), Vec::new());
    let f = Filter::parse("user=alice").unwrap();
    assert!(!f.matches(&r, r.value));
    assert!(f.matches(&r, Some(br#"{"user":"alice"}"#)));
    assert!(!f.matches(&r, None), "a value the schema cannot decode");
}

#[test]
fn percent_escapes_spell_separators_dots_and_percent() {
    let f = Filter::parse("a%2Eb.c=x%2Fy%2Cz%25").unwrap();
    let c = &f.conditions().unwrap()[0];
    assert_eq!(c.field, Field::Json(vec!["a.b".into(), "c".into()]));
    assert_eq!(c.value.bytes, b"x/y,z%");
    assert!(keeps("a%2Eb.c=x%2Fy%2Cz%25", r#"{"a.b":{"c":"x/y,z%"}}"#));
    assert!(keeps("n%3Dm=1", r#"{"n=m":1}"#));
    let f = Filter::parse("@header.x%2Ey=1").unwrap();
    assert_eq!(f.conditions().unwrap()[0].field, Field::Header(b"x.y".to_vec()));
    assert!(keeps("user=", r#"{"user":""}"#), "an empty value");
}

#[test]
fn bad_filters_are_refused_naming_the_byte() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("user", 0),
        ("=x", 0),
        ("a=1,,b=2", 4),
        ("a=1,", 4),
        (",a=1", 0),
        ("a!x", 1),
        ("a=1,b!c", 5),
        ("a=%4", 2),
        ("a=%zz", 2),
        ("a=1,b=x%", 7),
        ("@foo=1", 0),
        ("@header.=1", 0),
        ("a..b=1", 2),
        ("a.=1", 2),
        ("%ff=1", 0),
    ];
    for (filter, at) in cases {
        let err = Filter::parse(filter).unwrap_err();
        assert_eq!(err.at, *at, "{filter}: {err}");
    }
    let long = format!("a={}", "x".repeat(MAX_FILTER_BYTES));
    assert_eq!(Filter::parse(&long).unwrap_err().at, MAX_FILTER_BYTES);
    assert!(Filter::parse(&long[..MAX_FILTER_BYTES]).is_ok());
}

/// Percent-encodes `s` as a filter must: separators, `%`, operators and (in names) dots.
fn encode(s: &str, name: bool) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "/,%=<>!~".contains(c) || (name && (c == '.' || c == '@')) {
            for b in c.to_string().bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn json_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-50i64..50).prop_map(Value::from),
        (-50i64..50).prop_map(|n| Value::from(n as f64 / 4.0)),
        "[a-c.,/%\"\\\\ é]{0,4}".prop_map(Value::String),
    ]
}

fn json_doc() -> impl Strategy<Value = Value> {
    let leaf = json_scalar();
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c.,%]{1,2}|0|1", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The reference of the issue's rules, written apart from the daemon's code: whether `doc`
/// holds `path op value`.
fn reference(doc: &Value, path: &[String], op: &str, value: &str) -> bool {
    let mut v = doc;
    for seg in path {
        v = match v {
            Value::Object(m) => match m.get(seg) {
                Some(x) => x,
                None => return false,
            },
            Value::Array(a) => match seg.parse::<usize>().ok().and_then(|i| a.get(i)) {
                Some(x) => x,
                None => return false,
            },
            _ => return false,
        };
    }
    let literal: Option<Value> = match value {
        "true" | "false" | "null" => serde_json::from_str(value).ok(),
        _ => None,
    };
    if let Some(l) = literal {
        return match op {
            "=" => *v == l,
            "!=" => *v != l,
            _ => false,
        };
    }
    let is_number = parse_number(value).is_some();
    if let (Value::Number(n), true, false) = (v, is_number, op == "~" || op == "!~") {
        let (a, b) = (n.as_f64().unwrap(), value.parse::<f64>().unwrap());
        return match op {
            "=" => a == b,
            "!=" => a != b,
            "<" => a < b,
            "<=" => a <= b,
            ">" => a > b,
            _ => a >= b,
        };
    }
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match op {
        "~" => text.contains(value),
        "!~" => !text.contains(value),
        "=" => text == value,
        "!=" => text != value,
        "<" => text.as_bytes() < value.as_bytes(),
        "<=" => text.as_bytes() <= value.as_bytes(),
        ">" => text.as_bytes() > value.as_bytes(),
        _ => text.as_bytes() >= value.as_bytes(),
    }
}

/// A path that exists in `doc` more often than not: walked from the document.
fn some_path(doc: &Value, picks: &[usize]) -> Vec<String> {
    let mut path = Vec::new();
    let mut v = doc;
    for &p in picks {
        match v {
            Value::Object(m) if !m.is_empty() => {
                let (k, x) = m.iter().nth(p % m.len()).unwrap();
                path.push(k.clone());
                v = x;
            }
            Value::Array(a) if !a.is_empty() => {
                path.push((p % a.len()).to_string());
                v = &a[p % a.len()];
            }
            _ => break,
        }
    }
    if path.is_empty() {
        path.push("a".into());
    }
    path
}

proptest! {
    /// Over random documents, every operator on a random existing (or missing) path agrees
    /// with the reference, and the byte-level check never rejects a match, whether the value is
    /// written compactly or with spaces (strings with quotes or backslashes are escaped).
    #[test]
    fn every_operator_agrees_with_the_reference_and_the_prefilter_never_loses_a_match(
        doc in json_doc(),
        picks in prop::collection::vec(0usize..8, 0..4),
        op in prop::sample::select(vec!["=", "!=", "<", "<=", ">", ">=", "~", "!~"]),
        from_doc in any::<bool>(),
        other in "[a-c.,/%\"é]{0,3}|-?[0-9]{1,2}(\\.[0-9]{1,2})?|true|false|null",
    ) {
        let path = some_path(&doc, &picks);
        // VALUE from the document's own field half of the time, so that equalities hold.
        let value = match (from_doc, lookup(&doc, &path)) {
            (true, Some(Value::String(s))) => s.clone(),
            (true, Some(v @ (Value::Number(_) | Value::Bool(_) | Value::Null))) => v.to_string(),
            _ => other,
        };
        let names: Vec<String> = path.iter().map(|s| encode(s, true)).collect();
        let filter = format!("{}{op}{}", names.join("."), encode(&value, false));
        prop_assume!(filter.len() <= MAX_FILTER_BYTES && !path.iter().any(String::is_empty));
        let f = Filter::parse(&filter).unwrap();
        let want = reference(&doc, &path, op, &value);
        for text in [doc.to_string(), serde_json::to_string_pretty(&doc).unwrap()] {
            let r = record(None, Some(text.as_bytes()), Vec::new());
            prop_assert_eq!(f.matches(&r, r.value), want, "{} on {}", filter, text);
            prop_assert_eq!(f.without_prefilter().matches(&r, r.value), want);
        }
    }

    /// Any text parses or is refused with a position inside it: never a panic.
    #[test]
    fn any_text_parses_or_is_refused_within_it(text in "[a-z.,=<>!~%@0-9A-F ]{0,40}") {
        match Filter::parse(&text) {
            Ok(f) => prop_assert!(
                !f.alternatives().is_empty() && f.alternatives().iter().all(|a| !a.is_empty())
            ),
            Err(e) => prop_assert!(e.at <= text.len(), "{}: {}", text, e),
        }
    }

    /// Names and values with every character a filter reserves come back as written once
    /// encoded.
    #[test]
    fn encoded_names_and_values_decode_to_what_was_written(
        name in "[a-z./,%=<>!~@é]{1,8}",
        value in "[a-z./,%=<>!~@é]{0,8}",
    ) {
        let filter = format!("{}={}", encode(&name, true), encode(&value, false));
        let f = Filter::parse(&filter).unwrap();
        let c = &f.conditions().unwrap()[0];
        prop_assert_eq!(&c.field, &Field::Json(vec![name.clone()]));
        prop_assert_eq!(&c.value.bytes, value.as_bytes());
    }
}

#[test]
fn a_field_is_read_without_the_document_as_a_full_parse_reads_it() {
    let docs = [
        r#"{"a":1,"a":2}"#,
        r#"{"a":{"b":[10,{"c":"x"}]},"z":"\u0061"}"#,
        r#"{"\u0061":3}"#,
        r#"[1,[2,3]]"#,
        r#"{"a":1} trailing"#,
        r#"{"a":1"#,
        r#""just a string""#,
        "17",
    ];
    let paths: &[&[&str]] = &[
        &["a"],
        &["a", "b", "1", "c"],
        &["a", "b", "0"],
        &["z"],
        &["1", "0"],
        &["0"],
        &["a", "x"],
    ];
    for doc in docs {
        let full: Option<Value> = serde_json::from_str(doc).ok();
        for path in paths {
            let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
            let want = full.as_ref().map(|d| lookup(d, &path).cloned());
            let got = extract::field(doc.as_bytes(), &path).ok();
            assert_eq!(got, want, "{doc} {path:?}");
        }
    }
}

#[test]
fn or_joins_alternatives_each_of_which_is_a_conjunction() {
    assert!(keeps("user=nobody,or,qty=3", ORDER));
    assert!(keeps("user=user-4242,qty=4,or,address.city=Oslo", ORDER));
    assert!(!keeps("user=user-4242,qty=4,or,address.city=Bergen", ORDER));
    assert!(!keeps("user=nobody,or,qty=2,or,item=cup", ORDER));
    let f = Filter::parse("a=1,b=2,or,c=3").unwrap();
    assert_eq!(f.alternatives().len(), 2);
    assert!(f.conditions().is_none());
    assert_eq!(Filter::parse("a=1,b=2").unwrap().conditions().map(<[_]>::len), Some(2));
    // A field named `or` is a condition like any other.
    assert!(!keeps("or=1", ORDER));
    for bad in ["or", "or,a=1", "a=1,or", "a=1,or,or,b=2", "a=1,,or,b=2"] {
        let e = Filter::parse(bad).unwrap_err();
        assert!(e.at <= bad.len(), "{bad}: {e}");
    }
}

#[test]
fn not_contains_is_the_negation_of_contains_on_fields_that_exist() {
    assert!(keeps("user!~9999", ORDER));
    assert!(!keeps("user!~4242", ORDER));
    assert!(keeps("qty!~7", ORDER));
    assert!(!keeps("qty!~3", ORDER));
    // A missing field, or a value that is not JSON, matches no condition on it.
    assert!(!keeps("missing!~x", ORDER));
    assert!(!keeps("user!~x", "not json"));
    let r = record(Some(b"k-1"), Some(b"v"), Vec::new());
    assert!(Filter::parse("@key!~2").unwrap().matches(&r, r.value));
    assert!(!Filter::parse("@key!~k-").unwrap().matches(&r, r.value));
}

#[test]
fn globs_and_regular_expressions_match_the_whole_text_or_anywhere() {
    let cases: &[(&str, bool)] = &[
        ("user=user-4%*", true),
        ("user=user-5%*", false),
        ("user=%*-4242", true),
        ("user=user-424%?", true),
        ("user=user-42%?", false),
        ("user!=user-4%*", false),
        ("user!=user-5%*", true),
        ("qty=%?", true),
        ("address.city=O%*o", true),
        ("user=%re:^user-4[0-9]+$", true),
        ("user=%re:^user-5", false),
        ("user=%re:42", true),
        ("user!=%re:42", false),
        ("item=%re:(?i)^PEN$", true),
        ("paid=%re:^tr", true),
        ("missing=%*", false),
        ("missing!=%*", false),
        // `%25*` is a `%` followed by `*`: no wildcard.
        ("user=user%25*", false),
    ];
    for (filter, want) in cases {
        assert_eq!(keeps(filter, ORDER), *want, "{filter}");
    }
    let k = record(Some(&[0xff, b'a', b'b']), Some(b"x/y,z"), Vec::new());
    let holds = |f: &str| Filter::parse(f).unwrap().matches(&k, k.value);
    assert!(holds("@key=%*ab"));
    assert!(holds("@key=%FF%*"));
    assert!(!holds("@key=%?ab"), "one character, and 0xff alone is none");
    assert!(holds("@value=x%2F%*%2Cz"));
    assert!(holds("@value=%re:^x%2Fy"));
    let null_key = record(None, Some(b"v"), Vec::new());
    assert!(!Filter::parse("@key=%*").unwrap().matches(&null_key, null_key.value));
    for bad in ["user<%*", "user~a%*", "user>=%re:a", "user=%re:(", "user=%re:a{99999}{99999}"] {
        let e = Filter::parse(bad).unwrap_err();
        assert!(e.at <= bad.len(), "{bad}: {e}");
    }
}

/// The reference of a glob: `*` any run, `?` one character, over the whole text.
fn glob_reference(pattern: &[char], text: &[char]) -> bool {
    match (pattern.split_first(), text.split_first()) {
        (None, _) => text.is_empty(),
        (Some(('*', rest)), _) => {
            (0..=text.len()).any(|i| glob_reference(rest, text.get(i..).unwrap_or_default()))
        }
        (Some(('?', rest)), Some((_, t))) => glob_reference(rest, t),
        (Some((p, rest)), Some((c, t))) => p == c && glob_reference(rest, t),
        (Some(_), None) => false,
    }
}

proptest! {
    /// A glob agrees with a reference matcher on every string field.
    #[test]
    fn a_glob_agrees_with_a_reference_matcher(
        pattern in "[ab*?.é]{0,6}",
        text in "[ab.é]{0,6}",
    ) {
        let encoded: String = pattern
            .chars()
            .map(|c| match c {
                '*' => "%*".to_string(),
                '?' => "%?".to_string(),
                c => c.to_string(),
            })
            .collect();
        prop_assume!(encoded.contains('%'));
        let doc = serde_json::json!({ "f": text }).to_string();
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        prop_assert_eq!(keeps(&format!("f={encoded}"), &doc), glob_reference(&p, &t));
        prop_assert_eq!(keeps(&format!("f!={encoded}"), &doc), !glob_reference(&p, &t));
    }
}
