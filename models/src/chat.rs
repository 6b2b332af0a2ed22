//! Chat prompts from the Jinja template a GGUF file carries in `tokenizer.chat_template`.
//!
//! Templates are written for Hugging Face's Python Jinja2 environment, so rendering mirrors it:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods (`startswith`, `strip`, ...),
//! loop controls and `raise_exception`.

use minijinja::syntax::SyntaxConfig;
use minijinja::{context, Environment, Error, ErrorKind, Value};
use thiserror::Error;

/// One turn of a conversation; `role` is `system`, `user`, `assistant` or a tool role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

#[derive(Debug, Error)]
pub enum ChatError {
    /// The template does not parse, or raised an error while rendering (for example a
    /// `raise_exception` on roles that do not alternate).
    #[error("chat template: {0:#}")]
    Template(#[from] Error),
}

/// Renders `messages` with `template`. With `add_generation_prompt` the result ends with the
/// header of the assistant's next turn, ready for generation.
pub fn render_chat(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String, ChatError> {
    let mut env = Environment::new();
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?,
    );
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |message: String| -> Result<(), Error> {
        Err(Error::new(ErrorKind::InvalidOperation, message))
    });
    let template = env.template_from_str(template)?;
    let messages: Value = messages
        .iter()
        .map(|m| Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())]))
        .collect();
    let rendered = template.render(context! {
        messages => messages,
        add_generation_prompt => add_generation_prompt,
        bos_token => bos_token,
        eos_token => eos_token,
    })?;
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_loops_filters_and_namespaces() {
        let template = "{{ bos_token }}{% set ns = namespace(n=0) %}\
            {% for m in messages %}{% set ns.n = ns.n + 1 %}\
            [{{ loop.index0 }}:{{ m.role }}] {{ m.content | trim }}\n{% endfor %}\
            {% if add_generation_prompt %}{{ ns.n }} {{ messages[-1].content.strip().startswith('Hi') }}{% endif %}";
        let messages = [
            Message::new("system", " Be brief. "),
            Message::new("user", "Hi!"),
        ];
        let out = render_chat(template, &messages, true, "<s>", "</s>").unwrap();
        assert_eq!(out, "<s>[0:system] Be brief.\n[1:user] Hi!\n2 True");
    }

    #[test]
    fn trims_blocks_like_transformers() {
        let template = "{% for m in messages %}\n  {% if m.role == 'user' %}\nU:{{ m.content }}\n  {% endif %}\n{% endfor %}";
        let out = render_chat(template, &[Message::new("user", "x")], false, "", "").unwrap();
        assert_eq!(out, "U:x\n");
    }

    #[test]
    fn raise_exception_is_an_error() {
        let template = "{{ raise_exception('roles must alternate') }}";
        let err = render_chat(template, &[], false, "", "").unwrap_err();
        assert!(err.to_string().contains("roles must alternate"), "{err}");
    }
}
