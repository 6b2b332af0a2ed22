fn main() {
    lalrpop::process_src().expect("grammar generation failed");
}
