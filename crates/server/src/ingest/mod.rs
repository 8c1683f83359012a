//! Layer 5, what feeds mounts: source clients (`source.rs`: `SOURCE` and `PUT`), SHOUTcast v1
//! sources on port + 1 (`shoutcast.rs`), looped files (`file.rs`: the demo, file mounts,
//! fallback files), relays pulled from other servers (`relay/`), and the registration every
//! feeder holds while it runs (`live_mount.rs`). Each ends in a `mount::feeder::Feeder`; the
//! fan-out never knows which one feeds a mount.

pub mod file;
pub mod live_mount;
pub mod rate_limit;
pub mod relay;
pub mod shoutcast;
pub mod source;
