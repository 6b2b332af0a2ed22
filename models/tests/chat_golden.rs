//! Chat templates rendered by zinc against Python Jinja2 as transformers configures it
//! (data/chat_golden.json, made by data/gen_chat_golden.py from data/chat/*.jinja).

use serde_json::Value;
use zinc_models::chat::{render_chat, Message};

fn template(name: &str) -> &'static str {
    match name {
        "gemma3" => include_str!("data/chat/gemma3.jinja"),
        "llama3.1" => include_str!("data/chat/llama3.1.jinja"),
        "qwen3" => include_str!("data/chat/qwen3.jinja"),
        other => panic!("no template fixture {other}"),
    }
}

#[test]
fn templates_render_like_jinja2() {
    let golden: Value = serde_json::from_str(include_str!("data/chat_golden.json")).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let conversation = case["conversation"].as_str().unwrap();
        let messages: Vec<Message> = golden["conversations"][conversation]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let result = render_chat(
            template(name),
            &messages,
            add_generation_prompt,
            case["bos_token"].as_str().unwrap(),
            case["eos_token"].as_str().unwrap(),
        );
        let label =
            format!("{name} / {conversation} / add_generation_prompt={add_generation_prompt}");
        match (&case["rendered"], result) {
            (Value::String(want), Ok(got)) => assert_eq!(&got, want, "{label}"),
            (Value::Null, Err(err)) => {
                let want = case["error"].as_str().unwrap();
                assert!(err.to_string().contains(want), "{label}: {err}");
            }
            (want, got) => panic!("{label}: expected {want:?}, got {got:?}"),
        }
    }
}
