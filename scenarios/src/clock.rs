//! Monotonic time in nanoseconds and absolute sleeps (`clock_nanosleep(TIMER_ABSTIME)`), so a
//! periodic loop does not drift and its measured lateness is the scheduler's, not the loop's.

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until `deadline_ns` on `CLOCK_MONOTONIC` (returns at once when it has passed).
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Milliseconds between two `now_ns` readings (`later - earlier`, never negative).
pub fn ms_between(earlier_ns: u64, later_ns: u64) -> f64 {
    later_ns.saturating_sub(earlier_ns) as f64 / 1e6
}

/// A small deterministic pseudo-random generator (xorshift64*), so every run of a probe sees
/// the same sequence of user actions.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_sleep_reaches_its_deadline() {
        let t0 = now_ns();
        sleep_until_ns(t0 + 2_000_000);
        assert!(now_ns() >= t0 + 2_000_000);
        // A deadline in the past returns at once.
        sleep_until_ns(t0);
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.uniform(2.0, 3.0);
            assert_eq!(x, b.uniform(2.0, 3.0));
            assert!((2.0..3.0).contains(&x));
            let i = a.int(3, 5);
            b.int(3, 5);
            assert!((3..=5).contains(&i));
        }
    }
}
