//! Which local process listens on a port (an attached `base_url`'s, a spawned server's): the listening socket of its port in /proc/net/tcp and
//! tcp6, then the processes whose /proc/PID/fd links to that socket's inode. Read only; never signals anything.

use std::collections::BTreeSet;

/// The port of an `http(s)://host:port/…` URL (80/443 when absent), and whether the host is this machine.
fn port_of(base_url: &str) -> Option<(u16, bool)> {
    let (scheme, rest) = base_url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, tail) = v6.split_once(']')?;
        (h, tail.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None if scheme == "https" => 443,
        None => 80,
    };
    let local = host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified() || is_ours(ip));
    Some((port, local))
}

/// An address of one of this machine's interfaces: something listens on it only if it is bound here.
fn is_ours(ip: std::net::IpAddr) -> bool {
    std::net::TcpListener::bind((ip, 0)).is_ok()
}

/// Inodes of sockets listening on `port` (any address), from the kernel's socket tables.
fn listening_inodes(port: u16) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else { continue };
            let Some(p) = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) else { continue };
            if p == port
                && *state == "0A"
                && let Ok(i) = inode.parse::<u64>()
                && i != 0
            {
                out.insert(i);
            }
        }
    }
    out
}

/// Why the processes listening on a port cannot be told. None of these proves the port free or foreign.
#[derive(Debug, thiserror::Error)]
pub enum PortOwnerError {
    #[error("cannot read a port from `{base_url}`")]
    NoPort { base_url: String },
    #[error("`{base_url}` is not on this machine")]
    NotLocal { base_url: String },
    #[error("no listening socket on port {port} is visible in /proc/net")]
    NoListener { port: u16 },
    #[error("/proc: {0}")]
    Proc(#[source] std::io::Error),
    /// A socket listens, but no process visible here holds it.
    #[error("the process listening on port {port} is not visible (another user or PID namespace)")]
    Hidden { port: u16 },
}

/// The pids serving `base_url`, or why they cannot be told.
pub fn server_pids(base_url: &str) -> Result<Vec<u32>, PortOwnerError> {
    let Some((port, local)) = port_of(base_url) else {
        return Err(PortOwnerError::NoPort { base_url: base_url.to_owned() });
    };
    if !local {
        return Err(PortOwnerError::NotLocal { base_url: base_url.to_owned() });
    }
    listening_pids(port)
}

/// The pids holding a socket that listens on `port` (any local address), or why they cannot be told.
pub(crate) fn listening_pids(port: u16) -> Result<Vec<u32>, PortOwnerError> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return Err(PortOwnerError::NoListener { port });
    }
    let wanted: BTreeSet<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids = Vec::new();
    let dir = std::fs::read_dir("/proc").map_err(PortOwnerError::Proc)?;
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        if fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| wanted.contains(&*l.to_string_lossy()))) {
            pids.push(pid);
        }
    }
    if pids.is_empty() {
        return Err(PortOwnerError::Hidden { port });
    }
    pids.sort_unstable();
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_the_url() {
        assert_eq!(port_of("http://127.0.0.1:8080/v1"), Some((8080, true)));
        assert_eq!(port_of("http://[::1]:9000"), Some((9000, true)));
        assert_eq!(port_of("https://localhost"), Some((443, true)));
        assert_eq!(port_of("not a url"), None);
    }

    #[test]
    fn finds_the_listener_of_our_own_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(server_pids(&format!("http://127.0.0.1:{port}")).unwrap(), vec![std::process::id()]);
        drop(l);
        let e = server_pids(&format!("http://127.0.0.1:{port}")).unwrap_err();
        assert!(matches!(e, PortOwnerError::NoListener { port: p } if p == port), "{e:?}");
        assert_eq!(e.to_string(), format!("no listening socket on port {port} is visible in /proc/net"));
    }

    #[test]
    fn a_url_without_a_port_or_off_this_machine_is_the_matching_variant() {
        let e = server_pids("not a url").unwrap_err();
        assert!(matches!(&e, PortOwnerError::NoPort { base_url } if base_url == "not a url"), "{e:?}");
        assert_eq!(e.to_string(), "cannot read a port from `not a url`");
        // TEST-NET-1 (RFC 5737): never an address of this machine.
        let e = server_pids("http://192.0.2.1:8000/v1").unwrap_err();
        assert!(matches!(e, PortOwnerError::NotLocal { .. }), "{e:?}");
        assert_eq!(e.to_string(), "`http://192.0.2.1:8000/v1` is not on this machine");
    }
}
