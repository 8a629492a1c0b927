//! One field of a JSON text, found without building the document: the text is deserialized
//! with a seed that follows the path and skips everything else ([`serde::de::IgnoredAny`]: no
//! allocation), so only the field's value becomes a [`Value`]. The whole text is still read and
//! checked, so a text that is not JSON has no field, as with a full parse; of keys given twice
//! the last one counts, as [`serde_json::Value`] keeps it.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The value at `path` in the JSON text `text`: `Err` when the text is not JSON, `Ok(None)`
/// when it is but has no such field.
pub(crate) fn field(text: &[u8], path: &[String]) -> Result<Option<Value>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let found = Path(path).deserialize(&mut de)?;
    de.end()?;
    Ok(found)
}

/// Follows the rest of a path into the value being deserialized.
struct Path<'p>(&'p [String]);

impl<'de> DeserializeSeed<'de> for Path<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        if self.0.is_empty() {
            return Value::deserialize(d).map(Some);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Path<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let Some((first, rest)) = self.0.split_first() else { return Ok(None) };
        let mut found = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == first.as_str() {
                found = map.next_value_seed(Path(rest))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let Some((first, rest)) = self.0.split_first() else { return Ok(None) };
        let index = first.parse::<usize>().ok();
        let mut found = None;
        let mut i = 0usize;
        loop {
            if Some(i) == index {
                match seq.next_element_seed(Path(rest))? {
                    Some(v) => found = v,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(found)
    }

    // A path going on into a scalar: no such field.
    fn visit_bool<E>(self, _: bool) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }
}

/// An object key, borrowed from the text unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}
