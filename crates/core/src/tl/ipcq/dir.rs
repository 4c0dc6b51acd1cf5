//! [`Dir`]: the directions a PE sends to and receives from. It lives here,
//! below `ccl`, so that `tl` can name it; `ccl::topology` re-exports it
//! and adds its parser.

use std::fmt;

/// A direction an algorithm sends to or receives from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Dir {
    /// East within the SIP (towards the next rank / column).
    E,
    /// West within the SIP.
    W,
    /// North within the SIP.
    N,
    /// South within the SIP.
    S,
    /// East between SIPs.
    GlobalE,
    /// West between SIPs.
    GlobalW,
    /// North between SIPs.
    GlobalN,
    /// South between SIPs.
    GlobalS,
}

impl Dir {
    /// Every direction, in table order.
    pub const ALL: [Dir; 8] = [
        Dir::E,
        Dir::W,
        Dir::N,
        Dir::S,
        Dir::GlobalE,
        Dir::GlobalW,
        Dir::GlobalN,
        Dir::GlobalS,
    ];

    /// The direction facing this one (E ↔ W, N ↔ S, global_E ↔ global_W,
    /// global_N ↔ global_S).
    pub const fn opposite(self) -> Dir {
        match self {
            Dir::E => Dir::W,
            Dir::W => Dir::E,
            Dir::N => Dir::S,
            Dir::S => Dir::N,
            Dir::GlobalE => Dir::GlobalW,
            Dir::GlobalW => Dir::GlobalE,
            Dir::GlobalN => Dir::GlobalS,
            Dir::GlobalS => Dir::GlobalN,
        }
    }

    /// The name algorithms use: `E`, `global_W`, ...
    pub const fn name(self) -> &'static str {
        match self {
            Dir::E => "E",
            Dir::W => "W",
            Dir::N => "N",
            Dir::S => "S",
            Dir::GlobalE => "global_E",
            Dir::GlobalW => "global_W",
            Dir::GlobalN => "global_N",
            Dir::GlobalS => "global_S",
        }
    }

    /// The `global_*` direction of the same compass point (itself if
    /// already global).
    pub const fn global(self) -> Dir {
        match self {
            Dir::E | Dir::GlobalE => Dir::GlobalE,
            Dir::W | Dir::GlobalW => Dir::GlobalW,
            Dir::N | Dir::GlobalN => Dir::GlobalN,
            Dir::S | Dir::GlobalS => Dir::GlobalS,
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
