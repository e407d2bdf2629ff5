//! The seeded generator behind torn power cuts: SplitMix64, so a seed replays the same tear
//! on every machine without a dependency whose stream could change between versions.

/// A small deterministic pseudo-random generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(bound) => self.next_u64() % bound,
            None => self.next_u64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let a: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.up_to(10))).collect();
        let b: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.up_to(10))).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|v| *v <= 10));
    }
}
