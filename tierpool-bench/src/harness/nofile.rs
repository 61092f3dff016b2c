//! The open-file limit: servers and workloads with thousands of connections raise it first.

/// Raises this process's open-file limit to at least `need` and to its hard limit (as root,
/// the hard limit too where `need` is above it); the soft limit then, or why it stays below
/// `need`. `raise_nofile(0)` lifts the soft limit to the hard one and cannot fail.
pub fn raise_nofile(need: u64) -> Result<u64, String> {
    // SAFETY: `getrlimit`/`setrlimit` read and write the struct they are given.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(format!(
                "cannot read the open-file limit: {}",
                std::io::Error::last_os_error()
            ));
        }
        let hard = lim.rlim_max;
        let want = libc::rlimit {
            rlim_cur: hard.max(need),
            rlim_max: hard.max(need),
        };
        // Refused (above the hard limit without the right): the hard limit is what remains.
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            let soft = libc::rlimit {
                rlim_cur: hard,
                rlim_max: hard,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < need {
            return Err(format!(
                "{need} open files are needed; the limit is {} and may not be raised here",
                lim.rlim_cur
            ));
        }
        Ok(lim.rlim_cur)
    }
}

#[cfg(test)]
mod tests {
    use super::raise_nofile;

    #[test]
    fn the_limit_rises_to_the_hard_one_and_says_when_it_cannot_reach_a_need() {
        let limit = raise_nofile(0).unwrap();
        assert!(limit >= 1);
        assert_eq!(raise_nofile(limit).unwrap(), limit);
        // More than any kernel allows (fs.nr_open is at most 2^30): refused, with the limit.
        let e = raise_nofile(1 << 40).unwrap_err();
        assert!(e.contains("may not be raised"), "{e}");
    }
}
