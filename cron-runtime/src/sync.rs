//! Taking a lock whatever happened to its last holder.
//!
//! A lock is poisoned when a thread panicked while holding it. The runtime calls no handler while it
//! holds one of its locks (a handler's panic is caught where the handler is polled), and what it does
//! under a lock is an insertion, a removal, a take or an assignment, which a panic elsewhere cannot
//! leave half done. So a poisoned lock is taken over: passing the poison on as a panic of its own
//! would stop the replica's claims, heartbeats and recording over data that is whole.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks `lock` for reading, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
#[allow(dead_code)] // For the stores' `RwLock`s.
pub(crate) fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Locks `lock` for writing, taking it over if it is poisoned (see the [module docs](self)).
#[inline]
#[allow(dead_code)] // For the stores' `RwLock`s.
pub(crate) fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// The value of `mutex`, which is being dropped, even if it is poisoned (see the [module docs](self)).
#[inline]
pub(crate) fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(|e| e.into_inner())
}
