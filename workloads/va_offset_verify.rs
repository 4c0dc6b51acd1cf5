//! `va_offset_verify`: data at arbitrary virtual-address offsets, across
//! VA pages and cubes, survives H2D → kernel copy → D2H bit for bit.
//!
//! The host places two f16 tensors of the same shape: `X` row-wise over
//! 4 cubes (12 KiB, 3 pages per cube) and `Y` row-wise over 3 cubes
//! (16 KiB, 4 pages per cube), so each is one gap-free VA range whose page
//! and cube boundaries fall in different places. It uploads `X`, then cuts
//! the element range into windows of uneven sizes (1, 7, 1000, 2049, ...)
//! starting at odd offsets, translates each window's VA range in `X` and in
//! `Y` to device segments (split where a cube boundary falls in either),
//! and launches a copy kernel on 2 PEs of each of `X`'s cubes: program `p`
//! copies pieces `p, p + P, ...` with `tl.load` into its TCM and `tl.store`
//! out. The host reads `Y` back.
//!
//! Checks: every shard's VA translates to its device address (both data
//! modes); with `--verify-data`, every byte of `Y` equals `X`'s source.
//! Figures: windows, pieces, windows that cross a page or a cube boundary,
//! and the phases' times.

use std::rc::Rc;

use half::f16;
use kernbench::mem::{DType, Segment};
use kernbench::runtime::launch::launch;
use kernbench::runtime::{DPPolicy, Split, TENSOR_PAGE_SIZE, Tensor, Torch};
use kernbench::sim;
use kernbench::tl::{Grid, Kernel, KernelError, Tl};
use kernbench::workloads::{Check, Definition, Figure, Outcome, WorkloadError};
use ndarray::{Array2, ArrayD};

/// The workload's (and its kernel's) name.
pub const NAME: &str = "va_offset_verify";

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "windows at odd VA offsets across pages and cubes, copied by kernels; every byte checked",
    params: &[],
    host: |torch, _options| Box::pin(run(torch)),
};

/// Rows and columns of both tensors (1 KiB rows of f16).
const SHAPE: [usize; 2] = [48, 512];
/// Cubes of `X` and of `Y`.
const X_CUBES: u32 = 4;
const Y_CUBES: u32 = 3;
/// PEs per cube running the copy.
const PES: u32 = 2;
/// Window sizes in elements, used in turn.
const WINDOWS: [usize; 8] = [1, 7, 1000, 2049, 333, 4096, 65, 1500];
/// Bytes per element.
const ELEMENT: u64 = 2;

/// One device-contiguous copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    src: u64,
    dst: u64,
    elems: usize,
}

/// The copy kernel: program `p` of `P` copies pieces `p, p + P, ...`.
async fn copy_pieces(tl: Tl, pieces: Rc<Vec<Piece>>) -> Result<(), KernelError> {
    let programs = (tl.num_programs(0) * tl.num_programs(1)) as usize;
    let me = (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) as usize;
    for piece in pieces.iter().skip(me).step_by(programs) {
        let staged = tl.load(piece.src, &[piece.elems], DType::F16).await?;
        tl.store(piece.dst, &staged).await?;
        tl.free(&staged)?;
    }
    Ok(())
}

async fn run(torch: Torch) -> Result<Outcome, WorkloadError> {
    let source = pattern();
    let start = sim::now();
    let x = placed(&torch, "X", X_CUBES)?;
    x.copy_from(&source).await?;
    let y = placed(&torch, "Y", Y_CUBES)?;
    let uploaded = sim::now();
    let windows = windows(source.len());
    let (pieces, crossings) = plan(&torch, &x, &y, &windows)?;
    let mut checks = vec![translation_check(&torch, &[&x, &y])?];
    let sip = x.shards()?[0].spec.sip;
    let kernel = Kernel::new(NAME, copy_pieces);
    let grid = Grid {
        pes: PES,
        cubes: X_CUBES,
    };
    let piece_count = pieces.len();
    let report = launch(torch.device(), &kernel, sip, grid, Rc::new(pieces)).await?;
    let launched = sim::now();
    if let Some(back) = y.to_ndarray::<f16>().await? {
        checks.push(bytes_check(&source, &back));
    }
    let read = sim::now() - launched;
    x.free()?;
    y.free()?;
    let figures = vec![
        Figure::int("tensor_bytes", source.len() as u64 * ELEMENT),
        Figure::int("page_bytes", TENSOR_PAGE_SIZE),
        Figure::int("windows", windows.len() as u64),
        Figure::int("pieces", piece_count as u64),
        Figure::int("windows_crossing_pages", crossings.pages),
        Figure::int("windows_crossing_cubes", crossings.cubes),
        Figure::time("h2d_ps", uploaded - start),
        Figure::time("launch_ps", report.end - report.start),
        Figure::time("d2h_ps", read),
    ];
    Ok(Outcome { checks, figures })
}

/// A distinct bit pattern per element (every f16 bit pattern but NaNs).
fn pattern() -> Array2<f16> {
    Array2::from_shape_fn((SHAPE[0], SHAPE[1]), |(r, c)| {
        let bits = ((r * SHAPE[1] + c) * 40_503 % 0x7C00) as u16;
        let sign = if c % 2 == 1 { 0x8000 } else { 0 };
        f16::from_bits(bits | sign)
    })
}

/// An f16 tensor of [`SHAPE`], rows banded over `cubes` cubes.
fn placed(torch: &Torch, name: &str, cubes: u32) -> Result<Tensor, WorkloadError> {
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes, 1);
    Ok(torch.zeros(&SHAPE, DType::F16, &dp)?.named(name))
}

/// `(offset, elems)` windows covering `0..elems`, sizes from [`WINDOWS`].
fn windows(elems: usize) -> Vec<(usize, usize)> {
    let mut windows = Vec::new();
    let mut offset = 0;
    for size in WINDOWS.iter().cycle() {
        if offset == elems {
            break;
        }
        let size = (*size).min(elems - offset);
        windows.push((offset, size));
        offset += size;
    }
    windows
}

/// Windows that cross a page boundary and that cross a cube boundary.
#[derive(Debug, Default)]
struct Crossings {
    pages: u64,
    cubes: u64,
}

/// The pieces that copy every window from `x` to `y`, and how many windows
/// cross boundaries.
fn plan(
    torch: &Torch,
    x: &Tensor,
    y: &Tensor,
    windows: &[(usize, usize)],
) -> Result<(Vec<Piece>, Crossings), WorkloadError> {
    let (x_va, y_va) = (x.data_ptr()?, y.data_ptr()?);
    let mut pieces = Vec::new();
    let mut crossings = Crossings::default();
    for &(offset, elems) in windows {
        let (at, len) = (offset as u64 * ELEMENT, elems as u64 * ELEMENT);
        let src = torch.segments(x_va + at, len)?;
        let dst = torch.segments(y_va + at, len)?;
        let before = pieces.len();
        pieces.extend(merge(&src, &dst));
        let first_page = at / TENSOR_PAGE_SIZE;
        crossings.pages += u64::from((at + len - 1) / TENSOR_PAGE_SIZE != first_page);
        crossings.cubes += u64::from(pieces.len() - before > 1);
    }
    Ok((pieces, crossings))
}

/// Pairs two segment lists of one length into pieces contiguous in both.
fn merge(src: &[Segment], dst: &[Segment]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut src_used, mut dst_used) = (0, 0);
    while let (Some(a), Some(b)) = (src.get(i), dst.get(j)) {
        let take = (a.len - src_used).min(b.len - dst_used);
        pieces.push(Piece {
            src: a.addr + src_used,
            dst: b.addr + dst_used,
            elems: (take / ELEMENT) as usize,
        });
        (src_used, dst_used) = (src_used + take, dst_used + take);
        if src_used == a.len {
            (i, src_used) = (i + 1, 0);
        }
        if dst_used == b.len {
            (j, dst_used) = (j + 1, 0);
        }
    }
    pieces
}

/// Every shard's VA translates to its device address.
fn translation_check(torch: &Torch, tensors: &[&Tensor]) -> Result<Check, WorkloadError> {
    let mut shards = 0;
    let mut wrong = Vec::new();
    for tensor in tensors {
        for shard in tensor.shards()? {
            shards += 1;
            if torch.translate(shard.va)? != shard.addr {
                wrong.push(format!("{} cube {}", tensor.name(), shard.spec.cube));
            }
        }
    }
    let detail = match wrong.is_empty() {
        true => format!("{shards} shards: VA -> device address as allocated"),
        false => format!("mistranslated: {}", wrong.join(", ")),
    };
    Ok(Check::new(
        "va_translates_to_shards",
        wrong.is_empty(),
        detail,
    ))
}

/// `back` equals `source` bit for bit.
fn bytes_check(source: &Array2<f16>, back: &ArrayD<f16>) -> Check {
    let differing = source
        .iter()
        .zip(back.iter())
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    let bytes = source.len() as u64 * ELEMENT;
    let same_shape = source.shape() == back.shape();
    let detail = format!("{bytes} bytes; {differing} elements differ");
    Check::new("y_equals_x_bytewise", same_shape && differing == 0, detail)
}
