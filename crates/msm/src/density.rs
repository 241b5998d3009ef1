//! Density bitmaps: which variables a query has a base for (bellperson's `DensityTracker`).

use crate::MsmError;

/// One bit per variable; set bits are the variables that have a base, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Density {
    bits: Vec<bool>,
    selected: usize,
}

impl Density {
    /// From one flag per variable.
    pub fn from_bools(bits: Vec<bool>) -> Self {
        let selected = bits.iter().filter(|&&b| b).count();
        Self { bits, selected }
    }

    /// Every one of `len` variables selected.
    pub fn all(len: usize) -> Self {
        Self {
            bits: vec![true; len],
            selected: len,
        }
    }

    /// Number of variables covered.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// True when it covers no variable.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// Number of selected variables (the number of bases).
    pub fn selected(&self) -> usize {
        self.selected
    }

    /// One flag per variable.
    pub fn bits(&self) -> &[bool] {
        &self.bits
    }

    /// This bitmap's variables after `other`'s (an input bitmap, then an aux one).
    pub fn concat(&self, other: &Density) -> Density {
        let mut bits = Vec::with_capacity(self.bits.len() + other.bits.len());
        bits.extend_from_slice(&self.bits);
        bits.extend_from_slice(&other.bits);
        Density {
            bits,
            selected: self.selected + other.selected,
        }
    }

    /// Whether variable `i` is selected.
    pub fn is_selected(&self, i: usize) -> bool {
        self.bits.get(i).copied().unwrap_or(false)
    }

    /// Checks the bitmap against the scalars and bases it is used with.
    pub fn check(&self, scalars: usize, bases: usize) -> Result<(), MsmError> {
        if self.bits.len() != scalars {
            return Err(MsmError::DensityLength {
                bitmap: self.bits.len(),
                scalars,
            });
        }
        if self.selected != bases {
            return Err(MsmError::DensityCount {
                selected: self.selected,
                bases,
            });
        }
        Ok(())
    }

    /// The scalars of the selected variables, in order.
    pub fn select<T: Copy>(&self, scalars: &[T]) -> Vec<T> {
        scalars
            .iter()
            .zip(&self.bits)
            .filter(|(_, &b)| b)
            .map(|(s, _)| *s)
            .collect()
    }
}
