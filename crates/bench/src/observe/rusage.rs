//! CPU time of this process or thread, from `getrusage`.

/// User and system CPU time (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// User-mode time (µs).
    pub user_us: u64,
    /// Kernel-mode time (µs).
    pub sys_us: u64,
}

fn get(who: libc::c_int) -> CpuTimes {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return CpuTimes::default();
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    CpuTimes {
        user_us: us(ru.ru_utime),
        sys_us: us(ru.ru_stime),
    }
}

/// CPU time of the whole process so far (all threads).
pub fn process() -> CpuTimes {
    get(libc::RUSAGE_SELF)
}

/// CPU time of the calling thread so far.
pub fn thread() -> CpuTimes {
    get(libc::RUSAGE_THREAD)
}

/// CPU time of this process's children that ended and were waited for (worker processes).
pub fn children() -> CpuTimes {
    get(libc::RUSAGE_CHILDREN)
}
