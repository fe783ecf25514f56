//! Building the guard as a stack, as tower's `ServiceBuilder` does (tower
//! itself is not needed: every layer here is synchronous, and a step is a
//! plain value). The layers are listed outermost first, in the order an
//! operation meets them, and the service they wrap comes last:
//!
//! ```text
//! Stack::new().layer(a).layer(b).over(s)  ==  Over { step: a, inner: Over { step: b, inner: s } }
//! ```

/// One step of the guard wrapped around the service below it. What the
/// pair does is the step's `Service` impl (`layers.rs`, `reload.rs`).
#[derive(Debug)]
pub struct Over<Step, S> {
    pub(super) step: Step,
    pub(super) inner: S,
}

/// What a listed layer does to the service below it: wraps it.
pub(crate) trait Layer<S> {
    type Service;
    fn wrap(self, inner: S) -> Self::Service;
}

/// The layers listed so far; [`Stack::over`] wraps them, in order, around
/// the service at the bottom.
pub(crate) struct Stack<L>(L);

/// No layer yet.
pub(crate) struct Identity;

/// A step, as a layer: it wraps a service into an [`Over`].
pub(crate) struct Step<T>(T);

/// `inner` listed after `outer`: `inner` wraps the service first.
pub(crate) struct Pair<Inner, Outer> {
    inner: Inner,
    outer: Outer,
}

impl<S> Layer<S> for Identity {
    type Service = S;
    fn wrap(self, inner: S) -> S {
        inner
    }
}

impl<T, S> Layer<S> for Step<T> {
    type Service = Over<T, S>;
    fn wrap(self, inner: S) -> Over<T, S> {
        Over {
            step: self.0,
            inner,
        }
    }
}

impl<S, Inner: Layer<S>, Outer: Layer<Inner::Service>> Layer<S> for Pair<Inner, Outer> {
    type Service = Outer::Service;
    fn wrap(self, service: S) -> Self::Service {
        self.outer.wrap(self.inner.wrap(service))
    }
}

impl Stack<Identity> {
    pub(crate) fn new() -> Self {
        Stack(Identity)
    }
}

impl<L> Stack<L> {
    /// `step` below every layer listed before it.
    pub(crate) fn layer<T>(self, step: T) -> Stack<Pair<Step<T>, L>> {
        Stack(Pair {
            inner: Step(step),
            outer: self.0,
        })
    }

    /// The stack over `service`, the first layer listed outermost.
    pub(crate) fn over<S>(self, service: S) -> L::Service
    where
        L: Layer<S>,
    {
        self.0.wrap(service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_layer_listed_is_the_outermost() {
        let stack = Stack::new().layer("a").layer("b").over("s");
        assert_eq!(stack.step, "a");
        assert_eq!(stack.inner.step, "b");
        assert_eq!(stack.inner.inner, "s");
    }
}
