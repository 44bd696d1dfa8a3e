//! The MIG geometry of the 7-instance parts and the profile names of each GPU model
//! (`../shared/REFERENCE.md` §11).
//!
//! Every model here has 8 memory slices and 7 SM slices. A GPU-instance profile has a
//! [`Shape`] (how many memory and SM slices it takes and where it may start), the same on
//! every model; only its name changes with the model's memory (`3g.40gb` on H100-80GB,
//! `3g.71gb` on H200).

use std::fmt;

/// Memory slices of one GPU.
pub const MEMORY_SLICES: u8 = 8;
/// SM (compute) slices of one GPU.
pub const SM_SLICES: u8 = 7;

/// The shape of a GPU-instance profile, largest first (the planner's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// `7g`: the whole GPU (GI profile ID 0), start 0.
    Seven,
    /// `4g`: 4 memory slices, 4 SM slices (ID 5), start 0 only.
    Four,
    /// `3g`: 4 memory slices, 3 SM slices (ID 9), starts 0 and 4.
    Three,
    /// `2g`: 2 memory slices, 2 SM slices (ID 14), starts 0, 2, 4.
    Two,
    /// `1g` with double memory: 2 memory slices, 1 SM slice (ID 15), starts 0, 2, 4, 6.
    OneDouble,
    /// `1g`: 1 memory slice, 1 SM slice (ID 19), starts 0–6.
    One,
    /// `1g+me`: a `1g` with the media engines (ID 20), at most one per GPU.
    OneMe,
}

/// Every shape, largest first; `Shape::index` is the position here.
pub const SHAPES: [Shape; 7] = [
    Shape::Seven,
    Shape::Four,
    Shape::Three,
    Shape::Two,
    Shape::OneDouble,
    Shape::One,
    Shape::OneMe,
];

impl Shape {
    /// Position in `SHAPES` (0 for `7g` … 6 for `1g+me`).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The GPU-instance profile ID `nvidia-smi mig -lgip` prints and `-cgi` takes.
    pub fn gi_profile_id(self) -> u32 {
        match self {
            Shape::Seven => 0,
            Shape::Four => 5,
            Shape::Three => 9,
            Shape::Two => 14,
            Shape::OneDouble => 15,
            Shape::One => 19,
            Shape::OneMe => 20,
        }
    }

    /// Memory slices taken (the placement's size).
    pub fn memory_slices(self) -> u8 {
        match self {
            Shape::Seven => 8,
            Shape::Four | Shape::Three => 4,
            Shape::Two | Shape::OneDouble => 2,
            Shape::One | Shape::OneMe => 1,
        }
    }

    /// SM slices taken: the number before `g` in the profile name.
    pub fn sm_slices(self) -> u8 {
        match self {
            Shape::Seven => 7,
            Shape::Four => 4,
            Shape::Three => 3,
            Shape::Two => 2,
            Shape::OneDouble | Shape::One | Shape::OneMe => 1,
        }
    }

    /// The memory slices a placement of this shape may start at.
    ///
    /// REFERENCE §11 gives no start slots for `1g+me`; it is a `1g` with the media
    /// engines, so it takes the `1g` starts (0–6) and the one-per-GPU limit.
    pub fn starts(self) -> &'static [u8] {
        match self {
            Shape::Seven | Shape::Four => &[0],
            Shape::Three => &[0, 4],
            Shape::Two => &[0, 2, 4],
            Shape::OneDouble => &[0, 2, 4, 6],
            Shape::One | Shape::OneMe => &[0, 1, 2, 3, 4, 5, 6],
        }
    }

    /// The most instances of this shape one GPU holds.
    pub fn max_per_gpu(self) -> u8 {
        match self {
            Shape::OneMe => 1,
            // Non-overlapping starts: every start of these shapes is usable at once.
            s => u8::try_from(s.starts().len()).unwrap_or(u8::MAX),
        }
    }

    /// The memory slices a placement at `start` covers, as a bit mask (bit i = slice i).
    pub fn mask(self, start: u8) -> u8 {
        let ones = (1u16 << self.memory_slices()) - 1;
        u8::try_from((ones << start) & 0xff).unwrap_or(0)
    }
}

/// One GPU model's profile names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// The name the CLI takes (`h100-80gb`).
    pub name: &'static str,
    /// The product as NVIDIA names it.
    pub product: &'static str,
    /// Profile names in [`SHAPES`] order (`7g`, `4g`, `3g`, `2g`, `1g` double memory,
    /// `1g`, `1g+me`).
    names: [&'static str; 7],
}

impl Model {
    /// The profile name of `shape` on this model.
    pub fn profile_name(&self, shape: Shape) -> &'static str {
        self.names[shape.index()]
    }

    /// The shape of the profile called `name` on this model, if it has one.
    pub fn shape(&self, name: &str) -> Option<Shape> {
        SHAPES.into_iter().find(|s| self.profile_name(*s) == name)
    }

    /// The profile names, smallest first (as `nvidia-smi mig -lgip` lists them).
    pub fn profile_names(&self) -> Vec<&'static str> {
        SHAPES.iter().rev().map(|s| self.profile_name(*s)).collect()
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

const fn model(name: &'static str, product: &'static str, names: [&'static str; 7]) -> Model {
    Model {
        name,
        product,
        names,
    }
}

/// The built-in models, with the profile names REFERENCE §11 lists for each (the `+me`
/// name is the `1g` name with `+me`, as REFERENCE says the variant exists for the 1g
/// size).
///
/// `h100-96gb` and `gh200-144gb` are left out: REFERENCE §11 lists no profile names for
/// them, and names are not derived here; [`lookup`] says so.
pub const MODELS: [Model; 9] = [
    model(
        "a100-40gb",
        "NVIDIA A100 40GB",
        [
            "7g.40gb",
            "4g.20gb",
            "3g.20gb",
            "2g.10gb",
            "1g.10gb",
            "1g.5gb",
            "1g.5gb+me",
        ],
    ),
    model(
        "a100-80gb",
        "NVIDIA A100 80GB",
        [
            "7g.80gb",
            "4g.40gb",
            "3g.40gb",
            "2g.20gb",
            "1g.20gb",
            "1g.10gb",
            "1g.10gb+me",
        ],
    ),
    model(
        "h100-80gb",
        "NVIDIA H100 80GB",
        [
            "7g.80gb",
            "4g.40gb",
            "3g.40gb",
            "2g.20gb",
            "1g.20gb",
            "1g.10gb",
            "1g.10gb+me",
        ],
    ),
    model(
        "h100-94gb",
        "NVIDIA H100 NVL 94GB",
        [
            "7g.94gb",
            "4g.47gb",
            "3g.47gb",
            "2g.24gb",
            "1g.24gb",
            "1g.12gb",
            "1g.12gb+me",
        ],
    ),
    model(
        "h200-141gb",
        "NVIDIA H200 141GB",
        [
            "7g.141gb",
            "4g.71gb",
            "3g.71gb",
            "2g.35gb",
            "1g.35gb",
            "1g.18gb",
            "1g.18gb+me",
        ],
    ),
    model(
        "b200",
        "NVIDIA B200",
        [
            "7g.180gb",
            "4g.90gb",
            "3g.90gb",
            "2g.45gb",
            "1g.45gb",
            "1g.23gb",
            "1g.23gb+me",
        ],
    ),
    model(
        "gb200",
        "NVIDIA GB200",
        [
            "7g.186gb",
            "4g.93gb",
            "3g.93gb",
            "2g.47gb",
            "1g.47gb",
            "1g.23gb",
            "1g.23gb+me",
        ],
    ),
    model(
        "b300",
        "NVIDIA B300",
        [
            "7g.269gb",
            "4g.135gb",
            "3g.135gb",
            "2g.67gb",
            "1g.67gb",
            "1g.34gb",
            "1g.34gb+me",
        ],
    ),
    model(
        "gb300",
        "NVIDIA GB300",
        [
            "7g.278gb",
            "4g.139gb",
            "3g.139gb",
            "2g.70gb",
            "1g.70gb",
            "1g.35gb",
            "1g.35gb+me",
        ],
    ),
];

/// Model names the issue asks for that have no built-in profile table (REFERENCE §11
/// lists no profile names for them).
pub(crate) const WITHOUT_TABLE: [&str; 2] = ["h100-96gb", "gh200-144gb"];

/// A model name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Not a model name at all.
    #[error("unknown GPU model `{name}`: expected one of {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The known models, comma-separated.
        known: String,
    },
    /// A model whose MIG profile names are not known here.
    #[error(
        "GPU model `{name}` has no built-in MIG profile table (its profile names are not in the reference); expected one of {known}"
    )]
    NoTable {
        /// The name given.
        name: String,
        /// The known models, comma-separated.
        known: String,
    },
}

/// The known model names, comma-separated.
pub fn known_models() -> String {
    MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
}

/// The model called `name` (case-insensitive).
pub fn lookup(name: &str) -> Result<&'static Model, ModelError> {
    let lower = name.trim().to_ascii_lowercase();
    if let Some(m) = MODELS.iter().find(|m| m.name == lower) {
        return Ok(m);
    }
    let name = name.to_string();
    let known = known_models();
    if WITHOUT_TABLE.contains(&lower.as_str()) {
        Err(ModelError::NoTable { name, known })
    } else {
        Err(ModelError::Unknown { name, known })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_fits_in_the_memory_slices() {
        for s in SHAPES {
            for &start in s.starts() {
                assert!(start + s.memory_slices() <= MEMORY_SLICES, "{s:?}@{start}");
                // Starts are aligned to the size (a 2-slice shape starts on even slices).
                assert_eq!(start % s.memory_slices().min(4), 0, "{s:?}@{start}");
                assert_eq!(s.mask(start).count_ones(), u32::from(s.memory_slices()));
            }
            assert!(s.sm_slices() <= SM_SLICES);
        }
        assert_eq!(Shape::Seven.starts(), &[0]);
        assert_eq!(Shape::Four.starts(), &[0]);
        assert_eq!(Shape::Seven.mask(0), 0xff);
        assert_eq!(Shape::Three.mask(4), 0xf0);
    }

    #[test]
    fn slice_seven_is_reached_only_by_1g_double_3g_and_7g() {
        let reach: Vec<Shape> = SHAPES
            .into_iter()
            .filter(|s| s.starts().iter().any(|&st| s.mask(st) & 0x80 != 0))
            .collect();
        assert_eq!(reach, [Shape::Seven, Shape::Three, Shape::OneDouble]);
    }

    #[test]
    fn names_agree_with_the_shapes_on_every_model() {
        for m in MODELS {
            let mut seen = std::collections::HashSet::new();
            for s in SHAPES {
                let name = m.profile_name(s);
                assert!(seen.insert(name), "{}: {name} twice", m.name);
                // `Ng.` gives the SM slices.
                let g: u8 = name.split('g').next().unwrap_or("").parse().unwrap_or(0);
                assert_eq!(g, s.sm_slices(), "{}: {name}", m.name);
                assert_eq!(s == Shape::OneMe, name.ends_with("+me"), "{name}");
                assert_eq!(m.shape(name), Some(s));
            }
            // Memory in the name grows with the memory slices: the 1g is the smallest,
            // the double-memory 1g and the 2g have the same, 3g and 4g the same, 7g the most.
            let gb = |s: Shape| -> u32 {
                let name = m.profile_name(s).trim_end_matches("+me");
                name.split('.')
                    .nth(1)
                    .and_then(|x| x.trim_end_matches("gb").parse().ok())
                    .unwrap_or(0)
            };
            assert_eq!(gb(Shape::Two), gb(Shape::OneDouble), "{}", m.name);
            assert_eq!(gb(Shape::Three), gb(Shape::Four), "{}", m.name);
            assert_eq!(gb(Shape::One), gb(Shape::OneMe), "{}", m.name);
            assert!(gb(Shape::One) < gb(Shape::Two) && gb(Shape::Two) < gb(Shape::Three));
            assert!(gb(Shape::Three) < gb(Shape::Seven), "{}", m.name);
        }
    }

    #[test]
    fn lookup_names_the_known_models() {
        assert_eq!(lookup("H100-80GB").map(|m| m.name), Ok("h100-80gb"));
        let e = lookup("v100").unwrap_err().to_string();
        assert!(
            e.contains("v100") && e.contains("a100-40gb") && e.contains("gb300"),
            "{e}"
        );
        let e = lookup("gh200-144gb").unwrap_err();
        assert!(matches!(e, ModelError::NoTable { .. }), "{e}");
        assert_eq!(
            lookup("a100-40gb").map(|m| m.profile_names()),
            Ok(vec![
                "1g.5gb+me",
                "1g.5gb",
                "1g.10gb",
                "2g.10gb",
                "3g.20gb",
                "4g.20gb",
                "7g.40gb"
            ])
        );
    }
}
