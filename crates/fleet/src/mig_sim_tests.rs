//! Tests of `simulate --mig`: hand-checked streams where stock scatters and topoalign
//! packs, and invariants over random runs.

use proptest::prelude::*;
use topoalign_mig::validate_shapes;
use topoalign_mig::{MODELS, Shape};

use crate::mig_report::MigPolicyReport;
use crate::mig_sim::{
    MigPod, PlacedInstance, mig_stream, run_placer, simulate_mig, simulate_mig_observed,
};
use crate::mig_spec::{MigPlacer, MigSimSpec, default_mix};

fn spec(nodes: usize, gpus: usize, pods: usize, seed: u64) -> MigSimSpec {
    MigSimSpec {
        model: topoalign_mig::lookup("h100-80gb").unwrap(),
        nodes,
        gpus,
        pods,
        seed,
        mix: default_mix(),
        load: 1.0,
    }
}

/// Every pod at step 0, living past the end (no departures).
fn at_once(shapes: &[&[Shape]]) -> Vec<MigPod> {
    shapes
        .iter()
        .map(|s| MigPod {
            arrive: 0,
            life: 5,
            shapes: s.to_vec(),
        })
        .collect()
}

fn run(nodes: usize, gpus: usize, pods: &[MigPod], placer: MigPlacer) -> MigPolicyReport {
    let last = pods.iter().map(|p| p.arrive).max().unwrap_or(0);
    run_placer(&spec(nodes, gpus, pods.len(), 1), pods, last, placer, None)
}

fn summary(r: &MigPolicyReport) -> (u64, u64, u64, u64, u64) {
    (
        r.placed,
        r.refused,
        r.fragmented,
        r.instances,
        r.whole_gpus_end,
    )
}

#[test]
fn stock_blocks_the_7g_that_topoalign_places() {
    // One node, two GPUs: a 1g, a 4g, a 7g. Stock puts the 1g at slot 0 of GPU 0, so the
    // 4g (start 0 only) breaks GPU 1 and the 7g fits nowhere although 11 memory slices
    // and 9 SM slices are free. topoalign puts the 1g at slot 6: the 4g joins it on GPU 0
    // and GPU 1 stays whole for the 7g.
    let pods = at_once(&[&[Shape::One], &[Shape::Four], &[Shape::Seven]]);
    let stock = run(1, 2, &pods, MigPlacer::Stock);
    let topo = run(1, 2, &pods, MigPlacer::Topoalign);
    assert_eq!(summary(&stock), (2, 1, 1, 2, 0));
    assert_eq!(summary(&topo), (3, 0, 0, 3, 0));
}

#[test]
fn topoalign_keeps_a_gpu_whole_where_stock_breaks_two() {
    // 1g then 4g: stock GPU 0 {1g@0}, GPU 1 {4g@0}; topoalign GPU 0 {1g@6, 4g@0}.
    let pods = at_once(&[&[Shape::One], &[Shape::Four]]);
    assert_eq!(run(1, 2, &pods, MigPlacer::Stock).whole_gpus_end, 0);
    assert_eq!(run(1, 2, &pods, MigPlacer::Topoalign).whole_gpus_end, 1);
    // 3g then 4g: stock takes 3g@0, so the 4g needs GPU 1; topoalign takes 3g@4.
    let pods = at_once(&[&[Shape::Three], &[Shape::Four]]);
    assert_eq!(run(1, 2, &pods, MigPlacer::Stock).whole_gpus_end, 0);
    assert_eq!(run(1, 2, &pods, MigPlacer::Topoalign).whole_gpus_end, 1);
    // Seven 1g pods fill one GPU under both.
    let ones: Vec<&[Shape]> = vec![&[Shape::One]; 7];
    for placer in MigPlacer::ALL {
        assert_eq!(run(1, 3, &at_once(&ones), placer).whole_gpus_end, 2);
    }
}

#[test]
fn a_pods_set_backtracks_and_stays_on_one_node() {
    // 3g then 4g in one pod on one GPU: stock tries 3g@0 first, the 4g cannot follow,
    // the allocator backtracks to 3g@4.
    let pods = at_once(&[&[Shape::Three, Shape::Four]]);
    for placer in MigPlacer::ALL {
        assert_eq!(summary(&run(1, 1, &pods, placer)), (1, 0, 0, 2, 0));
    }
    // Two nodes of one GPU, each with a 4g: a pod of two 3g needs one node with 8 free
    // slices; each node has 4, the fleet 8: refused, not fragmented (no node had enough).
    let pods = at_once(&[
        &[Shape::Four],
        &[Shape::Four],
        &[Shape::Three, Shape::Three],
    ]);
    let r = run(2, 1, &pods, MigPlacer::Topoalign);
    assert_eq!(summary(&r), (2, 1, 0, 2, 0));
}

#[test]
fn departures_free_slices_and_gpus() {
    let pods = vec![
        MigPod {
            arrive: 0,
            life: 1,
            shapes: vec![Shape::Seven],
        },
        MigPod {
            arrive: 1,
            life: 3,
            shapes: vec![Shape::Seven],
        },
        MigPod {
            arrive: 2,
            life: 3,
            shapes: vec![Shape::One],
        },
    ];
    // The first 7g leaves at step 1, when the second takes the GPU; the 1g at step 2
    // finds no room.
    let r = run(1, 1, &pods, MigPlacer::Stock);
    assert_eq!(summary(&r), (2, 1, 0, 2, 0));
    assert_eq!(r.whole_gpus_mean, 0.0);
}

#[test]
fn parameters_out_of_range_name_their_flag() {
    let cases = [
        (spec(0, 8, 10, 1), "--nodes"),
        (spec(1, 0, 10, 1), "--gpus"),
        (spec(1, 65, 10, 1), "--gpus"),
        (spec(1, 8, 0, 1), "--pods"),
    ];
    for (s, flag) in cases {
        let e = simulate_mig(&s).unwrap_err().to_string();
        assert!(e.contains(flag), "{e}");
    }
    let mut s = spec(1, 8, 10, 1);
    s.load = f64::NAN;
    assert!(simulate_mig(&s).unwrap_err().to_string().contains("--load"));
    s.load = 1.0;
    s.mix = topoalign_mig::Mix::default();
    assert!(
        simulate_mig(&s)
            .unwrap_err()
            .to_string()
            .contains("--mig-mix")
    );
}

#[test]
fn topoalign_fragments_less_on_a_loaded_fleet() {
    // Over a few seeds at full load: fewer refusals with the slices free in total, at
    // least as many GPUs whole on average.
    let (mut frag, mut whole) = ([0u64; 2], [0f64; 2]);
    for seed in 1..=3 {
        let r = simulate_mig(&spec(20, 8, 3000, seed)).unwrap();
        for (i, p) in r.policies.iter().enumerate() {
            assert_eq!(p.placed + p.refused, 3000);
            frag[i] += p.fragmented;
            whole[i] += p.whole_gpus_mean;
        }
    }
    assert!(frag[1] < frag[0], "fragmented refusals {frag:?}");
    assert!(whole[1] >= whole[0], "whole GPUs on average {whole:?}");
}

fn check_live(model: &topoalign_mig::Model, gpus: usize, live: &[PlacedInstance]) {
    let mut by_gpu: Vec<Vec<(Shape, u8)>> = vec![Vec::new(); gpus];
    for p in live {
        by_gpu[p.gpu].push((p.shape, p.start));
    }
    for (g, list) in by_gpu.iter().enumerate() {
        if let Err(e) = validate_shapes(model, g, list) {
            panic!("GPU {g}: {e} in {list:?}");
        }
        let mut used = 0u8;
        for (s, st) in list {
            assert_eq!(used & s.mask(*st), 0, "GPU {g}: a memory slice twice");
            used |= s.mask(*st);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_step_keeps_the_rules_and_a_seed_repeats(
        nodes in 1usize..4,
        gpus in 1usize..4,
        pods in 1usize..150,
        seed in any::<u64>(),
        model in 0usize..MODELS.len(),
        load in 0.3f64..3.0,
    ) {
        let mut s = spec(nodes, gpus, pods, seed);
        s.model = &MODELS[model];
        s.load = load;
        let mut steps = 0u32;
        let mut observe = |_: MigPlacer, _: u32, live: &[PlacedInstance]| {
            steps += 1;
            check_live(s.model, nodes * gpus, live);
        };
        let a = simulate_mig_observed(&s, Some(&mut observe)).unwrap();
        prop_assert_eq!(steps, 2 * a.steps);
        let b = simulate_mig(&s).unwrap();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(mig_stream(&s), mig_stream(&s));
        for p in &a.policies {
            prop_assert_eq!(p.placed + p.refused, pods as u64);
            prop_assert!(p.fragmented <= p.refused);
            prop_assert!(p.whole_gpus_end <= p.gpus);
            prop_assert!(p.instances >= p.placed && p.instances <= 3 * p.placed);
        }
    }
}
