//! The bad-input table (RELIABILITY.md): one test per row that is not already covered in
//! `semantics.rs` (invalid builder values, impossible sizes) or `frame.rs` (hostile headers).
//! Every row gets a clear error or a documented, tested behaviour; none panics inside the
//! library, none loses or corrupts data.

use tierpool::{BufferPool, PooledBytes};

fn pool(tiers: &[usize]) -> BufferPool {
    BufferPool::builder()
        .tiers(tiers.iter().copied())
        .max_retained_bytes(64 << 20)
        .build()
        .unwrap()
}

/// Row: `get(0)` serves the smallest tier, empty.
#[test]
fn get_zero_serves_the_smallest_tier() {
    let p = pool(&[64, 4096]);
    let b = p.get(0);
    assert_eq!((b.len(), b.capacity()), (0, 64));
    assert!(p.try_get(0).is_ok());
}

/// Row: foreign `Vec`s of every awkward capacity are filed under the largest tier not above
/// their capacity when they lie within the tiers, and freed when they lie outside (below the
/// smallest or above the largest); a later get is never served a buffer smaller than asked.
#[test]
fn foreign_vecs_of_awkward_capacities() {
    let tiers = [64usize, 4096, 65536];
    let p = pool(&tiers);
    let largest = *tiers.last().unwrap();
    // (capacity, tier it must be filed under, or None: freed)
    let cases: [(usize, Option<usize>); 8] = [
        (0, None),
        (1, None),
        (63, None),
        (4095, Some(64)),
        (4096, Some(4096)),
        (4097, Some(4096)),
        (largest + 1, None),
        (largest * 2, None),
    ];
    for (cap, filed) in cases {
        let before = p.stats();
        let v: Vec<u8> = Vec::with_capacity(cap);
        let cap = v.capacity(); // the allocator may round, the pool sees this
        p.put(v);
        let after = p.stats();
        match filed {
            Some(tier) => {
                let t = tiers.iter().position(|&s| s == tier).unwrap();
                assert_eq!(
                    after.tiers[t].returned,
                    before.tiers[t].returned + 1,
                    "capacity {cap} should be filed under {tier}"
                );
            }
            None => assert_eq!(
                after.untiered_returned,
                before.untiered_returned + 1,
                "capacity {cap} should be freed"
            ),
        }
    }
    // Every buffer now retained must serve any request of its tier.
    for &tier in &tiers {
        for _ in 0..4 {
            let b = p.get(tier);
            assert!(b.capacity() >= tier, "asked {tier}, got {}", b.capacity());
        }
    }
}

/// Row: a buffer from one pool `put` into a pool with other tiers is filed by its capacity
/// there (or freed), never handed out too small.
#[test]
fn put_into_a_pool_of_other_tiers() {
    let a = pool(&[1000, 3000, 9000]);
    let b = pool(&[1024, 4096]);
    let from_a = a.get(3000).into_vec();
    assert_eq!(from_a.capacity(), 3000);
    b.put(from_a);
    assert_eq!(
        b.stats().tiers[0].returned,
        1,
        "3000 bytes filed under 1024"
    );
    let got = b.get(1024);
    assert!(got.capacity() >= 1024);
    drop(got);
    // Above b's largest tier: freed, not kept.
    b.put(a.get(9000).into_vec());
    assert_eq!(b.stats().untiered_returned, 1);
    // And a PooledBuf of pool A dropped after A is gone is simply freed.
    let late = a.get(1000);
    drop(a);
    drop(late);
}

/// Row: the readable part of a reused buffer is never stale, whichever way it is reused
/// (plain get, shared view, zeroed get).
#[test]
fn reused_buffers_never_show_a_previous_users_bytes() {
    let p = pool(&[256]);
    for round in 0..3 {
        let mut b = p.get(256);
        assert!(b.is_empty(), "round {round}: a reused buffer starts empty");
        b.extend_from_slice(&[0xEE; 256]);
        drop(b);
        let mut b = p.get(10);
        assert!(b.is_empty());
        b.extend_from_slice(b"new");
        let shared = b.into_shared();
        assert_eq!(
            &shared[..],
            b"new",
            "a shared view covers only what was written"
        );
        drop(shared);
        let z = p.get_zeroed(200);
        assert!(z.iter().all(|&x| x == 0));
    }
    assert!(p.stats().hits >= 6);
}

/// Row: slicing a shared view out of range panics with a clear message, as slicing `[u8]`
/// does (documented under "Panics"); in range, every combination works.
#[test]
fn shared_view_ranges() {
    let v = PooledBytes::from(vec![0, 1, 2, 3, 4]);
    assert_eq!(&v.slice(..)[..], &[0, 1, 2, 3, 4]);
    assert_eq!(&v.slice(5..)[..], &[] as &[u8]);
    assert_eq!(&v.slice(..=0)[..], &[0]);
    let r = std::panic::catch_unwind(|| v.slice(3..9));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("out of bounds"), "{msg}");
    let r = std::panic::catch_unwind(|| {
        let mut w = PooledBytes::from(vec![1]);
        w.split_to(2)
    });
    assert!(r.is_err());
}

/// Row: a huge number of tiers is refused by name, not accepted and slow.
#[test]
fn too_many_tiers_is_a_config_error() {
    let e = BufferPool::builder()
        .tiers(1..=(tierpool::Builder::MAX_TIERS + 1))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("tiers"), "{e}");
}
