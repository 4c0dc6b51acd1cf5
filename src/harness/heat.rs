//! What the heat maps colour (ADR-0117): each link's time on an explained
//! interval's critical path, against the link with the most, so the
//! bottleneck is the strongest colour; the tooltip adds the link's busy
//! fraction over the whole interval, which alone hides a link saturated
//! on the path for part of it. Also the colour ramp, its legend, the
//! [`RANKED`] links labelled on the drawings and the cube drawn.
//!
//! Knows an [`Explanation`]'s link figures and the machine's edges; the
//! drawings themselves are `web`'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::explain::{Explanation, percent};
use crate::hw::explain::Class;
use crate::topology::{EdgeKind, Machine};

/// How many links, most time on the path first, carry their rank on the
/// drawings.
pub const RANKED: usize = 3;

/// One direction of a link in the interval.
#[derive(Debug, Clone, Copy, Default)]
struct LinkHeat {
    /// Its time on the critical path, in ps.
    path_ps: u64,
    /// Its busy fraction over the interval, in [0, 1].
    busy: f64,
}

/// Links' time on the critical path and busy fractions over an explained
/// interval, by link name (`from->to`).
#[derive(Debug, Clone, Default)]
pub struct Heat {
    by_link: BTreeMap<String, LinkHeat>,
    /// The interval, in ps.
    duration_ps: u64,
    /// The most time one link has on the path: the ramp's top.
    scale_ps: u64,
    /// The [`RANKED`] links with the most time on the path, by name: their
    /// rank from 1.
    ranks: BTreeMap<String, usize>,
}

/// How a drawn link (both directions of an edge) is coloured.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeHeat {
    /// Its colour; `None` when neither direction did anything (grey).
    pub colour: Option<String>,
    /// Its tooltip: each direction's path share and busy fraction.
    pub title: String,
    /// Its rank among the links with the most time on the path, if it is
    /// one of the [`RANKED`].
    pub rank: Option<usize>,
}

impl Heat {
    /// The heat of `explanation`'s links.
    pub fn of(explanation: &Explanation) -> Heat {
        let mut by_link: BTreeMap<String, LinkHeat> = explanation
            .links
            .iter()
            .map(|u| {
                let busy = u.busy_fraction.clamp(0.0, 1.0);
                (u.name.clone(), LinkHeat { path_ps: 0, busy })
            })
            .collect();
        let on_links = explanation
            .on_path
            .iter()
            .filter(|c| Class::names_a_link(&c.class));
        for component in on_links.clone() {
            by_link.entry(component.name.clone()).or_default().path_ps = component.ps;
        }
        // `on_path` is most first.
        let ranks = on_links
            .take(RANKED)
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i + 1))
            .collect();
        Heat {
            scale_ps: by_link.values().map(|l| l.path_ps).max().unwrap_or(0),
            by_link,
            duration_ps: explanation.duration_ps,
            ranks,
        }
    }

    /// The heat of edge `id` of `machine` and its reverse: the colour of
    /// the direction with more time on the path.
    pub fn edge(&self, machine: &Machine, id: usize) -> EdgeHeat {
        let edge = &machine.edges()[id];
        let there = machine.link_name(edge.from, edge.to);
        let back = machine.link_name(edge.to, edge.from);
        let (a, b) = (self.by_link.get(&there), self.by_link.get(&back));
        let path_ps = a.map_or(0, |l| l.path_ps).max(b.map_or(0, |l| l.path_ps));
        let colour = (a.is_some() || b.is_some()).then(|| heat_colour(self.share(path_ps)));
        let rank = [&there, &back]
            .iter()
            .filter_map(|n| self.ranks.get(*n).copied())
            .min();
        let title = format!("{}; {}", self.describe(&there, a), self.describe(&back, b));
        EdgeHeat {
            colour,
            title,
            rank,
        }
    }

    /// `path_ps` against the ramp's top, in [0, 1].
    fn share(&self, path_ps: u64) -> f64 {
        match self.scale_ps {
            0 => 0.0,
            top => path_ps as f64 / top as f64,
        }
    }

    /// One direction's tooltip text.
    fn describe(&self, name: &str, link: Option<&LinkHeat>) -> String {
        let link = link.copied().unwrap_or_default();
        format!(
            "{name}: {:.1} % of the critical path, {:.1} % busy over the interval",
            percent(link.path_ps, self.duration_ps),
            link.busy * 100.0
        )
    }

    /// The cube to draw, `(sip, cube)`: the one holding the NoC link (or
    /// PE, HBM or port attachment) with the most time on the path.
    pub fn cube(&self, machine: &Machine) -> (u32, u32) {
        let mut best = (0, (0, 0));
        for edge in machine.edges() {
            if !matches!(
                edge.kind,
                EdgeKind::Noc | EdgeKind::Attach | EdgeKind::HbmPort
            ) {
                continue;
            }
            let (a, b) = (machine.node(edge.from), machine.node(edge.to));
            let name = machine.link_name(edge.from, edge.to);
            let ps = self.by_link.get(&name).map_or(0, |l| l.path_ps);
            if let (Some(sip), Some(cube)) = (a.sip.or(b.sip), a.cube.or(b.cube))
                && ps > best.0
            {
                best = (ps, (sip, cube));
            }
        }
        best.1
    }

    /// The legend at `(x, y)`: the ramp from no time on the path to the
    /// most one link has.
    pub fn legend(&self, svg: &mut String, x: f64, y: f64) {
        let top = percent(self.scale_ps, self.duration_ps);
        let _ = writeln!(
            svg,
            "<g class=\"legend\"><text x=\"{x}\" y=\"{}\">link's share of the critical path (#n: n-th most)</text>",
            y - 4.0
        );
        for i in 0..20 {
            let f = f64::from(i) / 19.0;
            let _ = writeln!(
                svg,
                "<rect x=\"{}\" y=\"{y}\" width=\"10\" height=\"12\" fill=\"{}\"/>",
                x + f64::from(i) * 10.0,
                heat_colour(f)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{x}\" y=\"{}\">0 %</text><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.1} %</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{top:.1} %</text>\
             <line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ccc\" stroke-width=\"3\"/>\
             <text x=\"{}\" y=\"{}\">idle</text></g>",
            y + 24.0,
            x + 100.0,
            y + 24.0,
            top / 2.0,
            x + 200.0,
            y + 24.0,
            x + 220.0,
            y + 6.0,
            x + 245.0,
            y + 6.0,
            x + 250.0,
            y + 10.0
        );
    }
}

/// A rank's label at `(x, y)`: `#n` in bold, haloed so it reads on any
/// line.
pub fn rank_label(svg: &mut String, rank: usize, (x, y): (f64, f64)) {
    let _ = write!(
        svg,
        "<text class=\"rank\" x=\"{x}\" y=\"{y}\" font-weight=\"bold\" font-size=\"12\" \
         stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">#{rank}</text>"
    );
}

/// The colour of `f` in [0, 1]: blue (nothing) through yellow to red (the
/// most).
pub fn heat_colour(f: f64) -> String {
    let f = f.clamp(0.0, 1.0);
    let stops = [
        (0.0, (44, 123, 182)),
        (0.5, (250, 220, 80)),
        (1.0, (215, 25, 28)),
    ];
    let (lo, hi) = if f <= 0.5 {
        (stops[0], stops[1])
    } else {
        (stops[1], stops[2])
    };
    let t = (f - lo.0) / (hi.0 - lo.0);
    let mix = |a: i32, b: i32| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as i32;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(lo.1.0, hi.1.0),
        mix(lo.1.1, hi.1.1),
        mix(lo.1.2, hi.1.2)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ramp_runs_blue_to_red_its_blue_falling_throughout() {
        assert_eq!(heat_colour(0.0), "#2c7bb6");
        assert_eq!(heat_colour(1.0), "#d7191c");
        let blue = |f: f64| u8::from_str_radix(&heat_colour(f)[5..7], 16).unwrap();
        for i in 0..20 {
            let (a, b) = (f64::from(i) / 20.0, f64::from(i + 1) / 20.0);
            assert!(blue(a) > blue(b), "{a} vs {b}");
        }
    }
}
