//! [`Kernel`]: a named PE program, and [`KernelRegistry`]: kernels by name
//! (seed ADR-0046's kernel registry), so workloads and the CLI find them.
//!
//! A kernel is an `async` function of its program's [`Tl`] and a typed
//! argument (a tuple or struct; each program gets a clone) returning
//! `Result<T, KernelError>`:
//!
//! ```
//! use kernbench_core::tl::{Kernel, KernelError, Tl};
//!
//! async fn which_pe(tl: Tl, offset: u32) -> Result<u32, KernelError> {
//!     Ok(tl.program_id(0) + offset)
//! }
//!
//! let kernel = Kernel::new("which_pe", which_pe);
//! assert_eq!(kernel.name(), "which_pe");
//! ```

use std::any::{Any, type_name};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use futures::future::LocalBoxFuture;

use super::{KernelError, Tl};

/// The future one program of a kernel runs.
type KernelFuture<T> = LocalBoxFuture<'static, Result<T, KernelError>>;

/// A named kernel taking arguments `A` and returning `T` per program.
pub struct Kernel<A, T> {
    name: Rc<str>,
    body: Rc<dyn Fn(Tl, A) -> KernelFuture<T>>,
}

impl<A, T> Clone for Kernel<A, T> {
    fn clone(&self) -> Self {
        Kernel {
            name: self.name.clone(),
            body: self.body.clone(),
        }
    }
}

impl<A, T> std::fmt::Debug for Kernel<A, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).finish()
    }
}

impl<A: 'static, T: 'static> Kernel<A, T> {
    /// The kernel `name` whose programs run `body(tl, args)`.
    pub fn new<F, Fut>(name: &str, body: F) -> Self
    where
        F: Fn(Tl, A) -> Fut + 'static,
        Fut: Future<Output = Result<T, KernelError>> + 'static,
    {
        Kernel {
            name: name.into(),
            body: Rc::new(move |tl, args| Box::pin(body(tl, args))),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One program's future (lazy: nothing runs until it is polled).
    pub(crate) fn call(&self, tl: Tl, args: A) -> KernelFuture<T> {
        (self.body)(tl, args)
    }
}

/// A registry lookup or registration that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A second kernel under one name.
    #[error("a kernel named `{0}` is already registered")]
    Duplicate(String),
    /// No kernel of that name.
    #[error("no kernel named `{name}` (registered: {})", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, sorted.
        known: Vec<String>,
    },
    /// The kernel exists with other argument or output types.
    #[error("kernel `{name}` takes {args} and returns {output}, not {asked}")]
    Signature {
        /// The kernel.
        name: String,
        /// Its argument type.
        args: &'static str,
        /// Its output type.
        output: &'static str,
        /// The `(args, output)` types asked for.
        asked: String,
    },
}

/// One registered kernel, its types erased.
struct Entry {
    kernel: Rc<dyn Any>,
    args: &'static str,
    output: &'static str,
}

/// Kernels by name, in name order.
#[derive(Default)]
pub struct KernelRegistry {
    kernels: BTreeMap<String, Entry>,
}

impl KernelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        KernelRegistry::default()
    }

    /// Adds `kernel` under its name.
    pub fn register<A: 'static, T: 'static>(
        &mut self,
        kernel: Kernel<A, T>,
    ) -> Result<(), RegistryError> {
        let name = kernel.name().to_owned();
        if self.kernels.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let entry = Entry {
            kernel: Rc::new(kernel),
            args: type_name::<A>(),
            output: type_name::<T>(),
        };
        self.kernels.insert(name, entry);
        Ok(())
    }

    /// The kernel `name`, which must take `A` and return `T`.
    pub fn get<A: 'static, T: 'static>(&self, name: &str) -> Result<Kernel<A, T>, RegistryError> {
        let entry = self
            .kernels
            .get(name)
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_owned(),
                known: self.kernels.keys().cloned().collect(),
            })?;
        let kernel = entry.kernel.downcast_ref::<Kernel<A, T>>();
        kernel.cloned().ok_or_else(|| RegistryError::Signature {
            name: name.to_owned(),
            args: entry.args,
            output: entry.output,
            asked: format!("({}, {})", type_name::<A>(), type_name::<T>()),
        })
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.kernels.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> KernelRegistry {
        let mut registry = KernelRegistry::new();
        let kernel = Kernel::new("pe_id", |tl: Tl, _: ()| async move { Ok(tl.program_id(0)) });
        registry.register(kernel).unwrap();
        registry
    }

    #[test]
    fn kernels_are_found_by_name_with_their_types() {
        let registry = registry();
        assert_eq!(registry.get::<(), u32>("pe_id").unwrap().name(), "pe_id");
        assert_eq!(registry.names().collect::<Vec<_>>(), ["pe_id"]);
    }

    #[test]
    fn misuse_is_a_typed_error() {
        let mut registry = registry();
        let again = Kernel::new("pe_id", |_: Tl, _: ()| async { Ok(()) });
        assert_eq!(
            registry.register(again).unwrap_err(),
            RegistryError::Duplicate("pe_id".to_owned())
        );
        let unknown = registry.get::<(), u32>("nope").unwrap_err().to_string();
        assert_eq!(unknown, "no kernel named `nope` (registered: pe_id)");
        let wrong = registry.get::<u64, u32>("pe_id").unwrap_err().to_string();
        assert_eq!(
            wrong,
            "kernel `pe_id` takes () and returns u32, not (u64, u32)"
        );
    }
}
