//! The real test model (SmolLM2-135M-Instruct Q4_1) written as an MLX directory
//! (`export_mlx`: Q4_1 repacked exactly into MLX affine 4-bit g32, scale d and bias m; the
//! Q8_0 embedding into 8-bit g32 through a per-module override; q/k rows back in Hugging
//! Face's order; the GGUF's tokenizer as a `tokenizer.json`) and run from there. The loader
//! moves q/k rows back to the adjacent-pair order the GGUF path runs, so the two paths run
//! the very same weights: the same config, token ids and chat prompt, teacher-forced logits
//! equal bit for bit on the cpu, and the same greedy text. Skips by name without the model
//! (fails under `KILN_REQUIRE_MODEL=1`).

use kiln::{DType, Device, Tensor};
use kiln_benches::decode::{
    export_mlx, generate, trace_logits, Checkpoint, ModelFile, Sampler, SamplingParams,
};
use kiln_tests::ggml::test_model;

/// A directory under the system's temp dir, removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_real_model_as_an_mlx_directory_gives_the_gguf_logits_bit_for_bit() {
    let test = "the_real_model_as_an_mlx_directory_gives_the_gguf_logits_bit_for_bit";
    let Some(path) = test_model(test) else {
        return;
    };
    let dir = TempDir(std::env::temp_dir().join(format!("kiln-mlx-smollm-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let Checkpoint::Gguf(mut file) = Checkpoint::open(&path).unwrap() else {
        panic!("{} is a GGUF file", path.display())
    };
    export_mlx(&mut file, &dir.0).unwrap();
    let mut gguf = ModelFile::open(&path).unwrap();
    let mut mlx = ModelFile::open(&dir.0).unwrap();

    assert_eq!(mlx.config, gguf.config);
    let Checkpoint::Mlx(d) = &mlx.checkpoint else {
        panic!("a directory opens as MLX")
    };
    assert!(!d.config.rope_traditional, "stored in Hugging Face's order");
    let q = d.config.quantization.as_ref().unwrap();
    let spec = |m: &str| q.of(m).map(|s| (s.bits, s.group_size));
    assert_eq!(spec("model.layers.0.mlp.up_proj"), Some((4, 32)), "Q4_1");
    assert_eq!(spec("model.embed_tokens"), Some((8, 32)), "Q8_0");
    assert_eq!(d.config.tie_word_embeddings, Some(true));

    let texts = [
        "The capital of France is",
        "1234 + 5678 = 6912; naïve café 🙂",
    ];
    for text in texts {
        let ids = gguf.tokenizer.encode(text).unwrap();
        assert_eq!(mlx.tokenizer.encode(text).unwrap(), ids, "{text}");
        let back = gguf.tokenizer.decode(&ids).unwrap();
        assert_eq!(mlx.tokenizer.decode(&ids).unwrap(), back, "{text}");
    }
    let chat = gguf
        .tokenizer
        .chat_prompt("What is the capital of France?")
        .unwrap();
    let mlx_chat = mlx.tokenizer.chat_prompt("What is the capital of France?");
    assert_eq!(mlx_chat.unwrap(), chat);
    assert_eq!(mlx.tokenizer.stop_ids(), gguf.tokenizer.stop_ids());

    let dev = Device::cpu();
    let ids = gguf.tokenizer.encode(&chat).unwrap();
    let forced = &ids[..ids.len().min(16)];
    let (mut rows, mut texts) = (vec![], vec![]);
    for f in [&mut gguf, &mut mlx] {
        let mut model = f.load(&dev, 128).unwrap();
        let mut logits = Tensor::zeros(&dev, DType::F32, &[1, f.config.vocab]).unwrap();
        rows.push(trace_logits(&mut model, forced, &mut logits).unwrap());
        let mut model = f.load(&dev, 128).unwrap();
        let mut sampler = Sampler::new(&dev, f.config.vocab, SamplingParams::default()).unwrap();
        let r = generate(&mut model, &f.tokenizer, &ids, 12, &mut sampler, |_| {}).unwrap();
        texts.push((r.generated, r.text));
    }
    for (p, (g, m)) in rows[0].iter().zip(&rows[1]).enumerate() {
        let same = g.iter().zip(m).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "position {p}: the directory's logits differ from the GGUF's"
        );
    }
    assert_eq!(texts[1], texts[0], "the greedy tokens and text");
    eprintln!(
        "{test}: {} positions bit for bit, greedy text {:?}",
        forced.len(),
        texts[0].1
    );
}
