//! A mix of GPU instances — how many of each profile — and the `PROFILE=COUNT,…` text
//! that names one.

use std::ops::{Index, IndexMut};

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::model::{Model, SHAPES, Shape};

/// How many instances of each shape, indexed by [`Shape`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Mix(pub [u32; 7]);

impl Index<Shape> for Mix {
    type Output = u32;
    fn index(&self, s: Shape) -> &u32 {
        &self.0[s.index()]
    }
}

impl IndexMut<Shape> for Mix {
    fn index_mut(&mut self, s: Shape) -> &mut u32 {
        &mut self.0[s.index()]
    }
}

impl Mix {
    /// No instances.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&c| c == 0)
    }

    /// Every count at most `other`'s.
    pub fn fits_in(&self, other: &Mix) -> bool {
        self.0.iter().zip(other.0).all(|(a, b)| *a <= b)
    }

    /// `self - other`, counts floored at 0.
    pub fn minus(&self, other: &Mix) -> Mix {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a = a.saturating_sub(b);
        }
        out
    }

    /// `self + other`, saturating.
    pub fn plus(&self, other: &Mix) -> Mix {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a = a.saturating_add(b);
        }
        out
    }

    /// The memory slices the mix takes.
    pub fn memory_slices(&self) -> u64 {
        SHAPES
            .iter()
            .map(|s| u64::from(self[*s]) * u64::from(s.memory_slices()))
            .sum()
    }

    /// The nonzero counts with the model's profile names, largest profile first.
    pub fn named(&self, model: &Model) -> ProfileCounts {
        ProfileCounts(
            SHAPES
                .iter()
                .filter(|s| self[**s] > 0)
                .map(|s| (model.profile_name(*s).to_string(), self[*s]))
                .collect(),
        )
    }
}

/// Counts by profile name, in a fixed order (largest profile first); serialises as a map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileCounts(pub Vec<(String, u32)>);

impl ProfileCounts {
    /// `3 × 1g.10gb, 1 × 3g.40gb` style text, or `none`.
    pub fn text(&self) -> String {
        if self.0.is_empty() {
            return "none".to_string();
        }
        let parts: Vec<String> = self.0.iter().map(|(p, c)| format!("{c} × {p}")).collect();
        parts.join(", ")
    }

    /// Nothing counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for ProfileCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Why a `PROFILE=COUNT,…` list is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    /// Nothing asked.
    #[error("expected PROFILE=COUNT,… (e.g. {example}), got nothing")]
    Empty {
        /// An example with the model's names.
        example: String,
    },
    /// An item without `=`.
    #[error("`{item}`: expected PROFILE=COUNT (e.g. {example})")]
    Item {
        /// The item.
        item: String,
        /// An example with the model's names.
        example: String,
    },
    /// A profile the model does not have.
    #[error("unknown profile `{profile}` for {model}: expected one of {known}")]
    Profile {
        /// The profile given.
        profile: String,
        /// The model.
        model: String,
        /// The model's profiles.
        known: String,
    },
    /// A count that is not a positive integer.
    #[error("{profile}={count}: expected COUNT to be a positive integer")]
    Count {
        /// The profile.
        profile: String,
        /// The count given.
        count: String,
    },
    /// The same profile twice.
    #[error("{profile} is given twice: expected each profile once")]
    Twice {
        /// The profile.
        profile: String,
    },
}

/// Parses `3g.40gb=2,1g.10gb=4` for `model`.
pub fn parse_mix(model: &Model, text: &str) -> Result<Mix, MixError> {
    let example = format!(
        "{}=2,{}=4",
        model.profile_name(Shape::Three),
        model.profile_name(Shape::One)
    );
    let mut mix = Mix::default();
    let mut seen = [false; 7];
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err(MixError::Empty { example });
    }
    for item in items {
        let Some((profile, count)) = item.split_once('=') else {
            return Err(MixError::Item {
                item: item.to_string(),
                example,
            });
        };
        let (profile, count) = (profile.trim(), count.trim());
        let shape = model.shape(profile).ok_or_else(|| MixError::Profile {
            profile: profile.to_string(),
            model: model.name.to_string(),
            known: model.profile_names().join(", "),
        })?;
        let n: u32 = count
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| MixError::Count {
                profile: profile.to_string(),
                count: count.to_string(),
            })?;
        if std::mem::replace(&mut seen[shape.index()], true) {
            return Err(MixError::Twice {
                profile: profile.to_string(),
            });
        }
        mix[shape] = n;
    }
    Ok(mix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lookup;

    #[test]
    fn parses_and_names_a_mix() {
        let m = lookup("h100-80gb").unwrap();
        let mix = parse_mix(m, "1g.10gb=4, 3g.40gb=2").unwrap();
        assert_eq!(mix[Shape::Three], 2);
        assert_eq!(mix[Shape::One], 4);
        assert_eq!(mix.memory_slices(), 12);
        assert_eq!(mix.named(m).text(), "2 × 3g.40gb, 4 × 1g.10gb");
        let json = serde_json::to_string(&mix.named(m)).unwrap();
        assert_eq!(json, r#"{"3g.40gb":2,"1g.10gb":4}"#);
    }

    #[test]
    fn bad_mixes_say_what_was_expected() {
        let m = lookup("a100-40gb").unwrap();
        let err = |t: &str| parse_mix(m, t).unwrap_err().to_string();
        assert!(err("").contains("PROFILE=COUNT"));
        assert!(err("3g.20gb").contains("expected PROFILE=COUNT"));
        let e = err("3g.40gb=1");
        assert!(e.contains("unknown profile `3g.40gb` for a100-40gb") && e.contains("7g.40gb"));
        assert!(err("3g.20gb=0").contains("positive integer"));
        assert!(err("3g.20gb=-1").contains("positive integer"));
        assert!(err("3g.20gb=x").contains("positive integer"));
        assert!(err("3g.20gb=99999999999").contains("positive integer"));
        assert!(err("3g.20gb=1,3g.20gb=2").contains("twice"));
    }
}
