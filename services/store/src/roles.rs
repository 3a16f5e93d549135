//! The database roles that keep row-level security honest: what makes a
//! login role unsafe for the services ([`RoleFacts::violations`], a pure
//! rule over facts read from the catalog), the catalog read itself
//! ([`role_facts`]), the migrate step that checks a service login before
//! any migration runs ([`check_service_role`]) and afterwards hands it its
//! two roles and closes the database to everyone else
//! ([`grant_service_role`]), and the start-up check of the services' own
//! login ([`check_login`]).
//!
//! Why it matters: the tenant path relies on RLS, and RLS does not bind a
//! superuser, a BYPASSRLS role, a table's owner, or anyone who can become one
//! with `SET ROLE`. So the services log in as a role that owns nothing and
//! reaches none of those, and may only switch to `genesis_app` (tenant path)
//! and `genesis_system` (platform loops), neither of which bypasses RLS.
//!
//! This module must never create a login role or set a password (the
//! platform does, with its own secret), never grant a service login anything
//! beyond the two roles and `CONNECT`, and never weaken an existing grant: an
//! unsafe role is refused with every violation named, and nothing about the
//! role is changed.

use std::fmt;

use serde::Deserialize;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};

use crate::error::StoreError;

/// The role the tenant path switches to.
pub const APP_ROLE: &str = "genesis_app";
/// The role the platform loops switch to.
pub const SYSTEM_ROLE: &str = "genesis_system";

/// Why a membership breaks the rule when the role it reaches bypasses RLS.
const BYPASSES_RLS: &str = "has BYPASSRLS";

/// Why a login was refused, or the migrate step could not finish.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// The `--service-role` name is not one the platform may use.
    #[error("invalid service role {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// The named role does not exist on the server.
    #[error(
        "service role {0:?} does not exist: create it first (CREATE ROLE {0} LOGIN PASSWORD '...'), then migrate again"
    )]
    Missing(String),
    /// The role breaks one or more of the rules; every one is named.
    #[error("database role {role:?} may not be the services' login: {}", list(.violations))]
    Unsafe {
        role: String,
        violations: Vec<RoleViolation>,
    },
    /// The catalog could not be read or a grant failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn list(violations: &[RoleViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One reason a role may not be the services' login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleViolation {
    /// `rolsuper`: RLS never applies to it.
    Superuser,
    /// `rolbypassrls`.
    BypassRls,
    /// `rolcreaterole`: it could grant itself other roles.
    CreateRole,
    /// `rolcreatedb`: more than the services need.
    CreateDb,
    /// `rolreplication`: it can read every row through a replication slot.
    Replication,
    /// It owns the schema's tables, so RLS is its to switch off.
    IsSchemaOwner,
    /// It owns objects in this database (listed, at most ten).
    Owns { objects: Vec<String>, total: usize },
    /// It can `SET ROLE` to (or inherits) a role that breaks a rule.
    MemberOf { role: String, why: &'static str },
    /// It holds privileges granted to it directly instead of through the
    /// two service roles (listed, at most ten).
    DirectGrants { objects: Vec<String>, total: usize },
    /// It may create objects in the database or in schema `public`.
    MayCreate { place: String },
    /// It is not a member of a role the store switches to.
    NotMemberOf { role: &'static str },
    /// `PUBLIC` may still connect to the database.
    PublicMayConnect { database: String },
}

impl fmt::Display for RoleViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Superuser => f.write_str("it is a superuser, which row-level security never binds"),
            Self::BypassRls => f.write_str("it has BYPASSRLS"),
            Self::CreateRole => f.write_str("it has CREATEROLE, so it could grant itself any role"),
            Self::CreateDb => f.write_str("it has CREATEDB, which the services never need"),
            Self::Replication => f.write_str("it has REPLICATION, which reads every row"),
            Self::IsSchemaOwner => f.write_str(
                "it owns the schema (the migrations ran as it); run the migrations as an owner role and log the services in as another",
            ),
            Self::Owns { objects, total } => {
                write!(f, "it owns {total} object(s) in the database: {}", objects.join(", "))
            }
            Self::MemberOf { role, why } => {
                write!(f, "it can SET ROLE to {role:?}, which {why}")
            }
            Self::DirectGrants { objects, total } => write!(
                f,
                "it holds {total} privilege(s) granted to it directly, beyond {APP_ROLE} and {SYSTEM_ROLE}: {}",
                objects.join(", ")
            ),
            Self::MayCreate { place } => write!(f, "it may CREATE in {place}"),
            Self::NotMemberOf { role } => write!(
                f,
                "it is not a member of {role}, which the store switches to (genesis-control migrate --service-role grants it)"
            ),
            Self::PublicMayConnect { database } => write!(
                f,
                "PUBLIC may CONNECT to database {database:?} (genesis-control migrate --service-role revokes it)"
            ),
        }
    }
}

/// A role another role can become, with what makes it dangerous.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Membership {
    pub name: String,
    pub superuser: bool,
    pub bypassrls: bool,
    pub createrole: bool,
    /// Objects it owns in this database.
    pub owns: usize,
}

/// What the catalog says about one role, as [`role_facts`] reads it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct RoleFacts {
    pub name: String,
    pub superuser: bool,
    pub bypassrls: bool,
    pub createrole: bool,
    pub createdb: bool,
    pub replication: bool,
    /// Owner of the migrated schema (of `tenants`); `None` before the first
    /// migration.
    pub schema_owner: Option<String>,
    /// Objects of this database it owns (relations, functions, types,
    /// schemas, the database itself), sorted.
    pub owned: Vec<String>,
    /// Every role it can `SET ROLE` to, directly or through other roles.
    pub memberships: Vec<Membership>,
    /// Objects on which it holds a privilege granted to it by name.
    pub direct_grants: Vec<String>,
    pub may_create_in_database: bool,
    pub may_create_in_public_schema: bool,
    pub database: String,
    pub public_may_connect: bool,
}

/// How [`RoleViolation::MayCreate`] names schema `public`.
const PUBLIC_SCHEMA: &str = "schema public";

/// How many objects a violation names before it only counts them.
const NAMED: usize = 10;

fn named(objects: &[String]) -> Vec<String> {
    objects.iter().take(NAMED).cloned().collect()
}

impl RoleFacts {
    /// Every rule this role breaks as a services' login, in a fixed order;
    /// empty when it is safe. Membership in [`APP_ROLE`] and
    /// [`SYSTEM_ROLE`] is required, not merely allowed: they are what the
    /// store switches to.
    pub fn violations(&self) -> Vec<RoleViolation> {
        let mut out = Vec::new();
        for (flag, v) in [
            (self.superuser, RoleViolation::Superuser),
            (self.bypassrls, RoleViolation::BypassRls),
            (self.createrole, RoleViolation::CreateRole),
            (self.createdb, RoleViolation::CreateDb),
            (self.replication, RoleViolation::Replication),
            (
                self.schema_owner.as_deref() == Some(self.name.as_str()),
                RoleViolation::IsSchemaOwner,
            ),
        ] {
            if flag {
                out.push(v);
            }
        }
        if !self.owned.is_empty() {
            out.push(RoleViolation::Owns {
                objects: named(&self.owned),
                total: self.owned.len(),
            });
        }
        for m in &self.memberships {
            let why = if m.superuser {
                Some("is a superuser")
            } else if m.bypassrls {
                Some(BYPASSES_RLS)
            } else if m.createrole {
                Some("has CREATEROLE")
            } else if self.schema_owner.as_deref() == Some(m.name.as_str()) {
                Some("owns the schema")
            } else if m.owns > 0 {
                Some("owns objects in the database")
            } else if m.name.starts_with("pg_") {
                Some("is a predefined role granting more than the services need")
            } else {
                None
            };
            if let Some(why) = why {
                out.push(RoleViolation::MemberOf {
                    role: m.name.clone(),
                    why,
                });
            }
        }
        if !self.direct_grants.is_empty() {
            out.push(RoleViolation::DirectGrants {
                objects: named(&self.direct_grants),
                total: self.direct_grants.len(),
            });
        }
        // A superuser may create anywhere; that is already its own violation.
        if !self.superuser {
            if self.may_create_in_database {
                out.push(RoleViolation::MayCreate {
                    place: format!("database {:?}", self.database),
                });
            }
            if self.may_create_in_public_schema {
                out.push(RoleViolation::MayCreate {
                    place: PUBLIC_SCHEMA.to_owned(),
                });
            }
        }
        for role in [APP_ROLE, SYSTEM_ROLE] {
            if !self.memberships.iter().any(|m| m.name == role) {
                out.push(RoleViolation::NotMemberOf { role });
            }
        }
        if self.public_may_connect {
            out.push(RoleViolation::PublicMayConnect {
                database: self.database.clone(),
            });
        }
        out
    }

    /// The violations that granting the two roles and revoking `PUBLIC`'s
    /// `CONNECT` (and `CREATE` on schema `public`, which servers before
    /// PostgreSQL 15 grant to `PUBLIC`) cannot cure: checked before
    /// [`grant_service_role`] changes anything, so an unsafe role is refused
    /// untouched. A `CREATE` granted to the role by name is still refused,
    /// as a direct grant. Nor is `genesis_system`'s (or `genesis_app`'s)
    /// own BYPASSRLS: the migrations take it away from the role before the
    /// grant step checks again, so a database whose role still carries it
    /// (one migrated by an earlier release on the same server) can be
    /// migrated rather than refused.
    fn violations_before_grant(&self) -> Vec<RoleViolation> {
        self.violations()
            .into_iter()
            .filter(|v| match v {
                RoleViolation::NotMemberOf { .. } | RoleViolation::PublicMayConnect { .. } => false,
                RoleViolation::MemberOf { role, why } => {
                    !([APP_ROLE, SYSTEM_ROLE].contains(&role.as_str()) && *why == BYPASSES_RLS)
                }
                RoleViolation::MayCreate { place } => place != PUBLIC_SCHEMA,
                _ => true,
            })
            .collect()
    }
}

/// One statement: the role's attributes, what it owns, every role it can
/// become (the transitive closure of `pg_auth_members`), its direct grants,
/// and the database's `CONNECT` for `PUBLIC`. Schemas `pg_*` and
/// `information_schema` belong to the server and are left out.
const FACTS_SQL: &str = "
WITH RECURSIVE
target AS (
    SELECT oid, rolname, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication
      FROM pg_roles WHERE rolname = $1),
reach(oid) AS (
    SELECT m.roleid FROM pg_auth_members m JOIN target t ON m.member = t.oid
    UNION
    SELECT m.roleid FROM pg_auth_members m JOIN reach r ON m.member = r.oid),
ns AS (
    SELECT oid, nspname, nspowner, nspacl FROM pg_namespace
     WHERE nspname !~ '^pg_' AND nspname <> 'information_schema'),
owned(owner, what) AS (
    SELECT c.relowner, 'relation ' || c.oid::regclass::text FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT p.proowner, 'function ' || p.oid::regprocedure::text FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT y.typowner, 'type ' || y.oid::regtype::text FROM pg_type y JOIN ns ON ns.oid = y.typnamespace
     WHERE y.typrelid = 0 AND y.typcategory <> 'A'
    UNION ALL
    SELECT nspowner, 'schema ' || quote_ident(nspname) FROM ns
    UNION ALL
    SELECT d.datdba, 'database ' || quote_ident(d.datname) FROM pg_database d
     WHERE d.datname = current_database()),
direct(what) AS (
    SELECT 'relation ' || c.oid::regclass::text FROM pg_class c JOIN ns ON ns.oid = c.relnamespace,
           aclexplode(c.relacl) a, target t WHERE a.grantee = t.oid
    UNION
    SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace,
           aclexplode(p.proacl) a, target t WHERE a.grantee = t.oid
    UNION
    SELECT 'type ' || y.oid::regtype::text FROM pg_type y JOIN ns ON ns.oid = y.typnamespace,
           aclexplode(y.typacl) a, target t WHERE a.grantee = t.oid
    UNION
    SELECT 'schema ' || quote_ident(ns.nspname) FROM ns, aclexplode(ns.nspacl) a, target t
     WHERE a.grantee = t.oid)
SELECT jsonb_build_object(
    'name', t.rolname, 'superuser', t.rolsuper, 'bypassrls', t.rolbypassrls,
    'createrole', t.rolcreaterole, 'createdb', t.rolcreatedb, 'replication', t.rolreplication,
    'schema_owner', (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = to_regclass('tenants')),
    'owned', (SELECT coalesce(jsonb_agg(o.what ORDER BY o.what), '[]'::jsonb) FROM owned o WHERE o.owner = t.oid),
    'memberships', (SELECT coalesce(jsonb_agg(jsonb_build_object(
            'name', r.rolname, 'superuser', r.rolsuper, 'bypassrls', r.rolbypassrls,
            'createrole', r.rolcreaterole,
            'owns', (SELECT count(*) FROM owned o WHERE o.owner = r.oid)) ORDER BY r.rolname), '[]'::jsonb)
        FROM reach x JOIN pg_roles r ON r.oid = x.oid),
    'direct_grants', (SELECT coalesce(jsonb_agg(d.what ORDER BY d.what), '[]'::jsonb) FROM direct d),
    'may_create_in_database', has_database_privilege(t.oid, current_database(), 'CREATE'),
    'may_create_in_public_schema', CASE WHEN to_regnamespace('public') IS NULL THEN false
        ELSE has_schema_privilege(t.oid, 'public', 'CREATE') END,
    'database', current_database(),
    'public_may_connect', EXISTS (
        SELECT 1 FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
         WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type = 'CONNECT'))
  FROM target t";

/// The catalog's facts about `role` in the connection's database; `None`
/// when no such role exists.
pub async fn role_facts(
    conn: &mut PgConnection,
    role: &str,
) -> Result<Option<RoleFacts>, StoreError> {
    let raw: Option<serde_json::Value> = sqlx::query_scalar(FACTS_SQL)
        .bind(role)
        .fetch_optional(&mut *conn)
        .await?;
    raw.map(crate::rows::decode).transpose()
}

/// The login's own name (`session_user`: unchanged by `SET ROLE`).
async fn session_user(conn: &mut PgConnection) -> Result<String, StoreError> {
    Ok(sqlx::query_scalar("SELECT session_user::text")
        .fetch_one(&mut *conn)
        .await?)
}

/// The migrating login (the schema owner's side of the split).
async fn current_user(conn: &mut PgConnection) -> Result<String, StoreError> {
    Ok(sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&mut *conn)
        .await?)
}

/// A plain connection on `url`, with no `SET ROLE`: the login as it is.
async fn connect(url: &str) -> Result<PgConnection, StoreError> {
    let opts: PgConnectOptions = crate::store::connect_options(url, None)?;
    Ok(opts.connect().await?)
}

/// Refuse a name the platform may not hand the services: empty, longer than
/// PostgreSQL keeps, a server role (`pg_*`), or one of the two roles the
/// login is given.
pub fn check_role_name(name: &str) -> Result<(), RoleError> {
    let reason = if name.is_empty() {
        Some("must not be empty")
    } else if name.len() > 63 {
        Some("must be at most 63 bytes (PostgreSQL truncates longer names)")
    } else if name.starts_with("pg_") {
        Some("names starting with pg_ are the server's")
    } else if name == APP_ROLE || name == SYSTEM_ROLE {
        Some("the services log in as their own role and switch to genesis_app and genesis_system")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(RoleError::InvalidName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Grant `genesis_app` and `genesis_system` to `svc`, revoke `CONNECT` on
/// the database (and `CREATE` on schema `public`) from `PUBLIC`, and grant
/// `CONNECT` to the migrating owner and `svc`. Role membership is
/// cluster-wide, so another database migrating at once may grant the same
/// membership first; the loser's duplicate is swallowed once the membership
/// is seen to exist.
const GRANT_SQL: &str = "
DO $$
DECLARE
    svc text := current_setting('genesis.service_role');
    svc_oid oid := (SELECT oid FROM pg_roles WHERE rolname = svc);
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['genesis_app', 'genesis_system'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                        WHERE g.rolname = r AND m.member = svc_oid) THEN
            BEGIN
                EXECUTE format('GRANT %I TO %I', r, svc);
            EXCEPTION WHEN unique_violation OR internal_error THEN
                IF NOT EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                                WHERE g.rolname = r AND m.member = svc_oid) THEN
                    RAISE;
                END IF;
            END;
        END IF;
    END LOOP;
    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), current_user, svc);
    IF to_regnamespace('public') IS NOT NULL THEN
        REVOKE CREATE ON SCHEMA public FROM PUBLIC;
    END IF;
END
$$";

/// Everything that can refuse `svc` before a grant: its name, that it is
/// not the migrating login, that it exists, and every violation a grant
/// would not cure.
async fn precheck(conn: &mut PgConnection, svc: &str) -> Result<(), RoleError> {
    check_role_name(svc)?;
    let owner = current_user(conn).await?;
    if owner == svc {
        return Err(RoleError::Unsafe {
            role: svc.to_owned(),
            violations: vec![RoleViolation::IsSchemaOwner],
        });
    }
    let before = role_facts(conn, svc)
        .await?
        .ok_or_else(|| RoleError::Missing(svc.to_owned()))?;
    let violations = before.violations_before_grant();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RoleError::Unsafe {
            role: svc.to_owned(),
            violations,
        })
    }
}

/// The migrate step's first check, made before any migration runs so that
/// a service role that could never be accepted changes nothing at all:
/// [`grant_service_role`] without the grant. On a database not migrated
/// yet the schema owner is not known, so only the migrating login itself
/// counts as the owner; the grant step checks again once it is.
pub async fn check_service_role(url: &str, svc: &str) -> Result<(), RoleError> {
    let mut conn = connect(url).await?;
    precheck(&mut conn, svc).await
}

/// The migrate step's second half: make `svc` (an existing login role,
/// created by the platform with its own password) the services' login on
/// the database of `url`, where the migrations have just run as the owner.
/// A role that breaks a rule that granting cannot cure (superuser, BYPASSRLS,
/// an owner, a member of one, direct grants, ...) is refused before anything
/// changes; after the grants the full rule is checked again.
pub async fn grant_service_role(url: &str, svc: &str) -> Result<RoleFacts, RoleError> {
    let mut conn = connect(url).await?;
    precheck(&mut conn, svc).await?;
    let mut tx = sqlx::Connection::begin(&mut conn)
        .await
        .map_err(StoreError::from)?;
    sqlx::query("SELECT set_config('genesis.service_role', $1, true)")
        .bind(svc)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    sqlx::query(GRANT_SQL)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    let after = role_facts(&mut conn, svc)
        .await?
        .ok_or_else(|| RoleError::Missing(svc.to_owned()))?;
    let violations = after.violations();
    if !violations.is_empty() {
        return Err(RoleError::Unsafe {
            role: svc.to_owned(),
            violations,
        });
    }
    Ok(after)
}

/// A service's start-up gate: [`check_login`], unless the operator set
/// `allow_owner_login` (`GENESIS_ALLOW_OWNER_LOGIN`, local development
/// against a trust-auth server only), which is then logged as a warning.
/// One home for control and the supervisor, so the escape reads the same
/// in both.
pub async fn check_service_login(url: &str, allow_owner_login: bool) -> Result<(), RoleError> {
    if allow_owner_login {
        tracing::warn!(
            "GENESIS_ALLOW_OWNER_LOGIN is set: the database login is not checked (local development only)"
        );
        return Ok(());
    }
    check_login(url).await.map(drop)
}

/// The services' start-up check: the login of `url` (its `session_user`)
/// must break no rule of [`RoleFacts::violations`]. A service logged in as
/// a superuser, a BYPASSRLS role or the schema owner would see through
/// row-level security, so it refuses to start instead.
pub async fn check_login(url: &str) -> Result<RoleFacts, RoleError> {
    let mut conn = connect(url).await?;
    let me = session_user(&mut conn).await?;
    let facts = role_facts(&mut conn, &me)
        .await?
        .ok_or_else(|| RoleError::Missing(me.clone()))?;
    let violations = facts.violations();
    if violations.is_empty() {
        Ok(facts)
    } else {
        Err(RoleError::Unsafe {
            role: me,
            violations,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

    use super::*;

    fn member(name: &str) -> Membership {
        Membership {
            name: name.into(),
            ..Membership::default()
        }
    }

    /// A login that breaks no rule: member of the two roles, nothing else.
    fn safe() -> RoleFacts {
        RoleFacts {
            name: "genesis_service".into(),
            schema_owner: Some("genesis_owner".into()),
            memberships: vec![member(APP_ROLE), member(SYSTEM_ROLE)],
            database: "genesis".into(),
            ..RoleFacts::default()
        }
    }

    #[test]
    fn a_login_with_only_the_two_roles_is_safe() {
        assert_eq!(safe().violations(), vec![]);
    }

    #[test]
    fn each_attribute_that_sees_through_rls_is_named() {
        let mut f = safe();
        f.superuser = true;
        f.bypassrls = true;
        f.createrole = true;
        f.createdb = true;
        f.replication = true;
        f.may_create_in_database = true;
        assert_eq!(
            f.violations(),
            vec![
                RoleViolation::Superuser,
                RoleViolation::BypassRls,
                RoleViolation::CreateRole,
                RoleViolation::CreateDb,
                RoleViolation::Replication,
            ],
            "a superuser's CREATE is not listed twice"
        );
    }

    #[test]
    fn the_schema_owner_and_what_it_owns_are_refused() {
        let mut f = safe();
        f.schema_owner = Some(f.name.clone());
        f.owned = (0..12).map(|i| format!("relation t{i:02}")).collect();
        let v = f.violations();
        assert_eq!(v[0], RoleViolation::IsSchemaOwner);
        match &v[1] {
            RoleViolation::Owns { objects, total } => {
                assert_eq!(*total, 12);
                assert_eq!(objects.len(), NAMED);
                assert!(v[1].to_string().starts_with("it owns 12 object(s)"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_membership_path_to_an_unsafe_role_is_named_with_its_reason() {
        let cases = [
            (
                Membership {
                    superuser: true,
                    ..member("postgres")
                },
                "is a superuser",
            ),
            (
                Membership {
                    bypassrls: true,
                    ..member("old_system")
                },
                "has BYPASSRLS",
            ),
            (
                Membership {
                    createrole: true,
                    ..member("admins")
                },
                "has CREATEROLE",
            ),
            (member("genesis_owner"), "owns the schema"),
            (
                Membership {
                    owns: 3,
                    ..member("other_owner")
                },
                "owns objects in the database",
            ),
            (member("pg_read_all_data"), "is a predefined role"),
        ];
        for (m, why) in cases {
            let mut f = safe();
            let name = m.name.clone();
            f.memberships.push(m);
            let v = f.violations();
            assert_eq!(v.len(), 1, "{name}: {v:?}");
            let text = v[0].to_string();
            assert!(
                text.contains(&format!("{name:?}")) && text.contains(why),
                "{text}"
            );
        }
        // Membership in a harmless role of the platform's is no violation.
        let mut f = safe();
        f.memberships.push(member("readers"));
        assert_eq!(f.violations(), vec![]);
    }

    #[test]
    fn direct_grants_create_rights_and_public_connect_are_refused() {
        let mut f = safe();
        f.direct_grants = vec!["relation tenants".into()];
        f.may_create_in_database = true;
        f.may_create_in_public_schema = true;
        f.public_may_connect = true;
        assert_eq!(
            f.violations(),
            vec![
                RoleViolation::DirectGrants {
                    objects: vec!["relation tenants".into()],
                    total: 1
                },
                RoleViolation::MayCreate {
                    place: "database \"genesis\"".into()
                },
                RoleViolation::MayCreate {
                    place: "schema public".into()
                },
                RoleViolation::PublicMayConnect {
                    database: "genesis".into()
                },
            ]
        );
    }

    #[test]
    fn the_two_service_roles_are_required_and_only_grantable_gaps_wait_for_the_grant() {
        let mut f = safe();
        f.memberships.clear();
        f.public_may_connect = true;
        assert_eq!(
            f.violations(),
            vec![
                RoleViolation::NotMemberOf { role: APP_ROLE },
                RoleViolation::NotMemberOf { role: SYSTEM_ROLE },
                RoleViolation::PublicMayConnect {
                    database: "genesis".into()
                },
            ]
        );
        assert_eq!(f.violations_before_grant(), vec![]);
        // PUBLIC's CREATE on schema public (before PostgreSQL 15) is revoked
        // by the grant step; CREATE on the database is not.
        f.may_create_in_public_schema = true;
        assert_eq!(f.violations_before_grant(), vec![]);
        f.may_create_in_database = true;
        assert_eq!(
            f.violations_before_grant(),
            vec![RoleViolation::MayCreate {
                place: "database \"genesis\"".into()
            }]
        );
        f.may_create_in_database = false;
        f.bypassrls = true;
        assert_eq!(f.violations_before_grant(), vec![RoleViolation::BypassRls]);
    }

    #[test]
    fn the_system_roles_own_bypassrls_waits_for_the_migration_that_removes_it() {
        // A server where an earlier release left genesis_system bypassing
        // RLS: the migrations remove it before the grant step, so only the
        // full check (after them) may refuse it.
        let mut f = safe();
        f.memberships = vec![
            member(APP_ROLE),
            Membership {
                bypassrls: true,
                ..member(SYSTEM_ROLE)
            },
        ];
        let bypassing = RoleViolation::MemberOf {
            role: SYSTEM_ROLE.into(),
            why: BYPASSES_RLS,
        };
        assert_eq!(f.violations(), vec![bypassing.clone()]);
        assert_eq!(f.violations_before_grant(), vec![]);
        // Any other role that bypasses RLS is refused before anything runs.
        f.memberships.push(Membership {
            bypassrls: true,
            ..member("other_bypasser")
        });
        assert_eq!(
            f.violations_before_grant(),
            vec![RoleViolation::MemberOf {
                role: "other_bypasser".into(),
                why: BYPASSES_RLS,
            }]
        );
    }

    #[test]
    fn a_role_name_the_platform_may_not_use_is_refused_precisely() {
        for (name, part) in [
            ("", "empty"),
            ("pg_monitor", "pg_"),
            (APP_ROLE, "own role"),
            (SYSTEM_ROLE, "own role"),
            ("a\nb", "control"),
        ] {
            let err = check_role_name(name).unwrap_err().to_string();
            assert!(err.contains(part), "{name:?}: {err}");
        }
        let long = "r".repeat(64);
        assert!(check_role_name(&long).is_err());
        assert!(check_role_name("genesis_service").is_ok());
    }

    #[test]
    fn an_unsafe_error_names_the_role_and_every_violation() {
        let err = RoleError::Unsafe {
            role: "postgres".into(),
            violations: vec![RoleViolation::Superuser, RoleViolation::BypassRls],
        };
        assert_eq!(
            err.to_string(),
            "database role \"postgres\" may not be the services' login: it is a superuser, which row-level security never binds; it has BYPASSRLS"
        );
    }
}
