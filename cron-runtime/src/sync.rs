//! Taking a lock whatever happened to its last holder.
//!
//! A lock is poisoned when a thread panicked while holding it. No handler runs while the runtime holds
//! one of its locks (a handler's panic is caught where the handler is polled), and the runtime's own
//! updates under a lock leave the data usable if one stops part way: the executor's are each one
//! insertion, removal, take or assignment, and the stores' guard caches, settings and state that a
//! half-made update would mislead less than a store that refuses every later call. So a poisoned lock
//! is taken over: passing the poison on as a panic of its own would stop the replica's claims,
//! heartbeats and recording.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks `lock` for reading, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // The PostgreSQL store's `RwLock`s.
pub(crate) fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Locks `lock` for writing, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // The PostgreSQL store's `RwLock`s.
pub(crate) fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// The value of `mutex`, which is being dropped, even if it is poisoned (see the [module docs](self)).
#[inline]
pub(crate) fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(|e| e.into_inner())
}
