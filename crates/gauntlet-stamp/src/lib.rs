//! When bytes arrived: clock readings (CLOCK_MONOTONIC, comparable across the processes of one host) and the
//! kernel's receive stamps on sockets (`SO_TIMESTAMPNS`), put on CLOCK_MONOTONIC.
//!
//! Its one job is timing reads. Both gauntlet's measuring client (`gauntlet-engine`) and the fake server's pacer
//! stamp with it, so that their times can be compared; it must never depend on either, parse what it reads, or
//! claim a kernel stamp the kernel did not give (a read without one says so with the time it returned).

use std::os::fd::RawFd;

/// CLOCK_MONOTONIC in nanoseconds: the clock `Instant` reads on Linux, comparable across processes of one host.
pub fn monotonic_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock` in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC now (ns); it cannot fail on Linux.
fn now_ns() -> u64 {
    monotonic_ns().unwrap_or(0)
}

/// Asks the kernel to stamp every read of socket `fd` with the arrival time of its bytes; false where it cannot.
#[cfg(target_os = "linux")]
pub fn enable_receive_stamps(fd: RawFd) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with an int option we own, on a socket the caller holds open.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Elsewhere reads are timed when they return.
#[cfg(not(target_os = "linux"))]
pub fn enable_receive_stamps(_fd: RawFd) -> bool {
    false
}

/// The kernel's receive stamp (CLOCK_REALTIME ns) if `c` is one.
///
/// # Safety
/// `c` points to a control message inside a buffer the kernel filled.
#[cfg(target_os = "linux")]
unsafe fn receive_stamp(c: *const libc::cmsghdr) -> Option<u64> {
    // SAFETY: the caller's promise; the data of an SCM_TIMESTAMPNS message is a timespec.
    unsafe {
        ((*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS).then(|| {
            let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        })
    }
}

#[cfg(not(target_os = "linux"))]
unsafe fn receive_stamp(_c: *const libc::cmsghdr) -> Option<u64> {
    None
}

/// One `recvmsg` on socket `fd` with `flags` (`MSG_DONTWAIT` for a non-blocking one): the bytes read, and on
/// CLOCK_MONOTONIC when they arrived (the kernel's stamp, see [`enable_receive_stamps`]) or, where the kernel gave
/// none, `Err` with the time the read returned.
pub fn recv_stamped(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> std::io::Result<(usize, Result<u64, u64>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; every pointer in it points into buffers that outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: as above; the kernel writes at most iov_len bytes and msg_controllen control bytes.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays inside the control buffer the kernel filled and reported in msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            stamp = receive_stamp(c).or(stamp);
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let (mono, real) = (now_ns(), clock_ns(libc::CLOCK_REALTIME));
    // The stamp is on the real-time clock; now, read on both clocks, puts it on the monotonic one.
    let at = match (stamp, real) {
        (Some(rx), Some(real)) if rx <= real && real - rx < mono => Ok(mono - (real - rx)),
        _ => Err(mono),
    };
    Ok((n as usize, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn monotonic_clock_agrees_with_instant_and_never_goes_back() {
        let a = monotonic_ns().unwrap();
        let started = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let elapsed = started.elapsed().as_nanos() as u64;
        let b = monotonic_ns().unwrap();
        assert!(b >= a + 5_000_000, "{a} → {b}");
        assert!(b - a >= elapsed, "the clock read before and after brackets the Instant's span");
    }

    /// A pair of connected loopback sockets: (writer, reader).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (reader, _) = listener.accept().unwrap();
        (writer, reader)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stamped_read_carries_the_arrival_not_the_return() {
        let (mut writer, reader) = pair();
        assert!(enable_receive_stamps(reader.as_raw_fd()));
        // The kernel turns stamping on for the whole host a moment after the first socket asks (a deferred static
        // key): the first reads of a process may come unstamped. A few rounds must bring a stamped one.
        for _ in 0..20 {
            let before = monotonic_ns().unwrap();
            writer.write_all(b"hello").unwrap();
            // The bytes wait in the socket while the reader is busy: the stamp must say when they came.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut buf = [0u8; 16];
            let (n, at) = recv_stamped(reader.as_raw_fd(), &mut buf, 0).unwrap();
            let after = monotonic_ns().unwrap();
            assert_eq!(&buf[..n], b"hello");
            let Ok(arrived) = at else { continue };
            // Clock conversion may be off by a little; the 50 ms wait must not be in the stamp.
            assert!(arrived + 1_000_000 >= before, "arrived {arrived} before the write at {before}");
            assert!(arrived + 40_000_000 < after, "stamp {arrived} is the return time {after}, not the arrival");
            return;
        }
        panic!("twenty reads on a socket with receive stamps enabled came without a kernel stamp");
    }

    #[test]
    fn a_read_without_stamps_says_so_with_its_return_time() {
        let (mut writer, reader) = pair();
        writer.write_all(b"x").unwrap();
        let before = monotonic_ns().unwrap();
        let mut buf = [0u8; 4];
        let (n, at) = recv_stamped(reader.as_raw_fd(), &mut buf, 0).unwrap();
        assert_eq!(n, 1);
        let returned = at.expect_err("stamps were never asked for");
        assert!(returned >= before && returned <= monotonic_ns().unwrap());
    }

    #[test]
    fn a_nonblocking_read_of_an_empty_socket_is_would_block() {
        let (_writer, reader) = pair();
        let err = recv_stamped(reader.as_raw_fd(), &mut [0u8; 4], libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    }
}
