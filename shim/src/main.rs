fn main() {
    rustpod::self_exec::run_if_invoked();
}
