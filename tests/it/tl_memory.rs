//! `tl.load` / `tl.store`: PE_DMA copies through `Device::dma_copy` whose
//! time is `Device::dma_copy_formula`; scratch allocation and its errors;
//! unmapped addresses named in the error.

use crate::tl_common;

use kernbench::mem::{DType, DataMode};
use kernbench::runtime::launch::LaunchError;
use kernbench::sim::{self, SimDuration};
use kernbench::tl::{Kernel, KernelError, Tl};
use kernbench::topology::{AddressMap, MemSpace};
use tl_common::*;

const LEN: usize = 4096;

#[derive(Clone, Copy)]
struct Copy {
    src: u64,
    dst: u64,
}

/// Loads `src` (far HBM) into TCM and stores it to `dst`; the TCM address
/// and the two copies' times.
async fn round_trip(tl: Tl, c: Copy) -> Result<(u64, SimDuration, SimDuration), KernelError> {
    let start = sim::now();
    let x = tl.load(c.src, &[LEN], DType::F16).await?;
    let loaded = sim::now();
    tl.store(c.dst, &x).await?;
    let stored = sim::now();
    assert_eq!(x.space(), tl.tcm());
    assert_eq!((x.shape(), x.bytes()), (&[LEN][..], 2 * LEN as u64));
    Ok((x.addr(), loaded - start, stored - loaded))
}

fn round_trip_case(data: DataMode) -> ((SimDuration, SimDuration), Option<Vec<u8>>) {
    let spec = spec(&[]);
    let device = device(&spec, data);
    let len = (2 * LEN) as u64;
    let src = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 5 }, len)
        .unwrap();
    let dst = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 0 }, len)
        .unwrap();
    let pattern = f16_bytes(&values(LEN, 7));
    device.write_untimed("host", src, &pattern).unwrap();
    let kernel = Kernel::new("round_trip", round_trip);
    let report = run(&device, kernel, ONE, Copy { src, dst }).unwrap();
    let (tcm, load, store) = report.programs[0].output;
    let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
    let issue = spec.pe().dma.issue_overhead;
    let formula = |from, to| device.dma_copy_formula(issue, pe, from, to, len).unwrap();
    assert_eq!(load, formula(src, tcm));
    assert_eq!(store, formula(tcm, dst));
    let copies: Vec<_> = device
        .oplog()
        .records()
        .iter()
        .map(|r| (r.name(), r.node().to_owned()))
        .filter(|(n, _)| *n == "copy")
        .collect();
    assert_eq!(copies.len(), 2, "both copies are logged");
    assert!(copies.iter().all(|(_, node)| node == "sip0.cube0.pe0.dma"));
    assert!(device.oplog().verify(&device.store()).is_ok());
    let back = device.read_untimed(dst, len).ok();
    if let Some(back) = &back {
        assert_eq!(back, &pattern);
    }
    ((load, store), back)
}

#[test]
fn load_and_store_move_the_bytes_in_their_formula_time() {
    let (times, back) = round_trip_case(DataMode::On);
    assert!(back.is_some());
    let (off, none) = round_trip_case(DataMode::Off);
    assert_eq!(off, times, "data off gives the same times");
    assert!(none.is_none());
}

#[test]
fn scratch_is_freed_when_the_kernel_ends() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let kernel = Kernel::new("scratch", |tl: Tl, _: ()| async move {
        let a = tl.alloc(&[1024], DType::F32)?;
        let b = tl.alloc(&[16, 16], DType::BF16)?;
        tl.free(&a)?;
        let twice = tl.free(&a).unwrap_err().to_string();
        let view = tl.view(b.addr(), &[256], DType::BF16)?;
        assert_eq!(view.space(), b.space());
        Ok(twice)
    });
    let report = run(&device, kernel, ONE, ()).unwrap();
    assert!(
        report.programs[0]
            .output
            .contains("is not a live scratch allocation of sip0.cube0.pe0"),
        "{}",
        report.programs[0].output
    );
    let tcm = MemSpace::Tcm {
        sip: 0,
        cube: 0,
        pe: 0,
    };
    let store = device.store();
    let in_tcm = store
        .regions()
        .filter(|r| store.address_map().decode(r.addr).map(|(space, _)| space) == Ok(tcm));
    assert_eq!(in_tcm.count(), 0, "no scratch left in the TCM");
}

#[test]
fn a_load_from_an_unmapped_address_names_the_address() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let hbm = MemSpace::Hbm { sip: 0, cube: 3 };
    let nowhere = device
        .fabric()
        .machine()
        .address_map()
        .encode(hbm, 0x4000)
        .unwrap();
    let kernel = Kernel::new("wild", |tl: Tl, addr: u64| async move {
        tl.load(addr, &[64], DType::F32).await.map(|_| ())
    });
    let error = run(&device, kernel, ONE, nowhere).unwrap_err();
    assert!(matches!(
        error,
        LaunchError::Program {
            source: KernelError::Device(_),
            ..
        }
    ));
    let message = error.to_string();
    assert!(message.contains(&format!("{nowhere:#018x}")), "{message}");
    assert!(message.contains("is not mapped"), "{message}");
    assert!(
        message.contains("sip0.cube0.pe0 (sip 0, cube 0, pe 0)"),
        "{message}"
    );
}

#[test]
fn an_address_off_the_machine_is_an_error_too() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let kernel = Kernel::new("off_machine", |tl: Tl, _: ()| async move {
        let error = tl
            .view(0x0900_0000_0000_0000u64, &[4], DType::F32)
            .unwrap_err();
        Ok(error.to_string())
    });
    let report = run(&device, kernel, ONE, ()).unwrap();
    let message = &report.programs[0].output;
    assert!(message.contains("0x0900000000000000"), "{message}");
}

/// Two loads joined: both in flight on PE_DMA at once.
async fn joined(tl: Tl, c: Copy) -> Result<SimDuration, KernelError> {
    let start = sim::now();
    let (a, b) = futures::try_join!(
        tl.load(c.src, &[LEN / 2], DType::F16),
        tl.load(c.src + LEN as u64, &[LEN / 2], DType::F16)
    )?;
    let took = sim::now() - start;
    tl.store(c.dst, &a).await?;
    tl.store(c.dst + a.bytes(), &b).await?;
    Ok(took)
}

#[test]
fn loads_can_be_joined_and_overlap_on_pe_dma() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let len = (2 * LEN) as u64;
    let src = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 5 }, len)
        .unwrap();
    let dst = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 0 }, len)
        .unwrap();
    let pattern = f16_bytes(&values(LEN, 9));
    device.write_untimed("host", src, &pattern).unwrap();
    let report = run(
        &device,
        Kernel::new("joined", joined),
        ONE,
        Copy { src, dst },
    )
    .unwrap();
    let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
    let issue = spec.pe().dma.issue_overhead;
    let tcm = MemSpace::Tcm {
        sip: 0,
        cube: 0,
        pe: 0,
    };
    let tcm = device
        .fabric()
        .machine()
        .address_map()
        .encode(tcm, 0)
        .unwrap();
    let one = device
        .dma_copy_formula(issue, pe, src, tcm, len / 2)
        .unwrap();
    assert!(
        report.programs[0].output < one * 2,
        "the two loads overlapped"
    );
    assert_eq!(device.read_untimed(dst, len).unwrap(), pattern);
}

#[test]
fn a_view_is_placed_anew_past_the_memory_of_the_last_one() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let map = device.fabric().machine().address_map().clone();
    let hbm_at = map
        .encode(MemSpace::Hbm { sip: 1, cube: 2 }, 0x100)
        .unwrap();
    let kernel = Kernel::new("views", move |tl: Tl, _: ()| {
        let map = map.clone();
        async move { views(tl, &map, hbm_at).await }
    });
    run(&device, kernel, ONE, ()).unwrap();
}

/// Views in this PE's TCM, past its end, in an HBM, and back.
async fn views(tl: Tl, map: &AddressMap, hbm_at: u64) -> Result<(), KernelError> {
    let tcm = map.encode(tl.tcm(), 0).unwrap();
    let capacity = map.capacity(tl.tcm());
    let space = |addr: u64| tl.view(addr, &[4], DType::F32).map(|h| h.space());
    assert_eq!(space(tcm + 64)?, tl.tcm());
    assert_eq!(space(tcm + capacity - 16)?, tl.tcm());
    let past = space(tcm + capacity).unwrap_err().to_string();
    assert!(past.contains("past the end"), "{past}");
    assert_eq!(space(hbm_at)?, MemSpace::Hbm { sip: 1, cube: 2 });
    assert_eq!(space(tcm)?, tl.tcm());
    Ok(())
}

/// ADR-0112: `copy_strided` moves every run of a transpose (a 4 × 3 grid
/// of f32 in HBM read row by row, written column by column into another
/// cube's HBM, one copy per column), and a bad shape is an error naming
/// the PE and the argument, not a panic.
#[test]
fn copy_strided_transposes_and_refuses_bad_shapes_naming_the_pe() {
    use kernbench::mem::Strided;
    async fn transpose(tl: Tl, (grid, out): (u64, u64)) -> Result<String, KernelError> {
        for c in 0..3u64 {
            let column = Strided {
                rows: 4,
                run: 4,
                src_stride: 12,
                dst_stride: 4,
            };
            tl.copy_strided(grid + 4 * c, out + 16 * c, column).await?;
        }
        let overlapping = Strided {
            rows: 2,
            run: 8,
            src_stride: 8,
            dst_stride: 4,
        };
        let refused = tl.copy_strided(grid, out, overlapping).await;
        Ok(refused.unwrap_err().to_string())
    }
    let device = device(&spec(&[]), DataMode::On);
    let grid = device.alloc(MemSpace::Hbm { sip: 0, cube: 0 }, 48).unwrap();
    let out = device.alloc(MemSpace::Hbm { sip: 0, cube: 5 }, 48).unwrap();
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    device
        .write_untimed("host", grid, &f32_bytes(&values))
        .unwrap();
    let kernel = Kernel::new("transpose", transpose);
    let report = run(&device, kernel, ONE, (grid, out)).unwrap();
    let refused = &report.programs[0].output;
    let want: Vec<f64> = (0..3)
        .flat_map(|c| (0..4).map(move |r| f64::from(r * 3 + c)))
        .collect();
    let back = from_f32(&device.read_untimed(out, 48).unwrap());
    assert_eq!(back.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), want);
    assert!(refused.contains("sip0.cube0.pe0"), "{refused}");
    assert!(refused.contains("`dst_stride` 4 B"), "{refused}");
    assert!(device.oplog().verify(&device.store()).is_ok());
}
